/**
 * The engines of the real-engine suites as containers (testcontainers), run as docker-compose.yml runs
 * them: EventStoreDB of the compose file's image and settings, its data on disk (the image's volume,
 * not `EVENTSTORE_MEM_DB`); MongoDB of the compose file's image and command, a one-node replica set
 * that clients reach through its replica-set URL (`?replicaSet=rs0`, not `directConnection`).
 *
 * Each engine listens on a host port chosen here and bound as is, so a restarted container
 * (`container.restart()`) answers where it did: Docker hands an ephemeral binding a new port on
 * restart. MongoDB listens on that same port inside its container and the set is initiated with the
 * host name and port this machine reaches it by: a replica-set client connects to the members the set
 * advertises, so the one member must be named as a client outside the container reaches it, and
 * mongod must recognise that name as itself (it does when the port is its own: by the address, or by
 * asking whoever answers there, which is itself through the published port).
 */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { StartedTestContainer } from 'testcontainers';
import { parse } from 'yaml';

const RUNTIME_PROBE_MS = 15_000;
/** Pulling an image can take minutes on a cold machine. */
export const ENGINE_STARTUP_MS = 10 * 60_000;
const ESDB_HTTP_PORT = 2113;
/** Checks of the replica set's election after `rs.initiate()`, half a second apart. */
const PRIMARY_CHECKS = 120;
/** Host ports picked free can be taken before Docker binds them: so many picks before giving up. */
const PORT_PICKS = 3;

/** Why no container can be started here, or undefined when a runtime answers. */
export async function containerRuntimeProblem(): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no answer within ${RUNTIME_PROBE_MS / 1000} s`)),
        RUNTIME_PROBE_MS,
      );
    });
    await Promise.race([getContainerRuntimeClient(), timeout]);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    clearTimeout(timer);
  }
}

/** A service of docker-compose.yml: its image, environment, command, and the paths it keeps in volumes. */
export interface ComposeService {
  image: string;
  environment: Record<string, string>;
  command: string[];
  /** The container paths its volumes are mounted at. */
  volumeTargets: string[];
}

/** Where EventStoreDB 24.10's image keeps its data: a `VOLUME` of its Dockerfile. */
export const EVENTSTORE_IMAGE_DATA = '/var/lib/eventstore';

/** A compose `environment`, as a map or as a list of `NAME=value` (a bare `NAME` is empty). */
export function composeEnvironment(raw: unknown): Record<string, string> {
  if (raw === undefined || raw === null) return {};
  if (Array.isArray(raw)) {
    return Object.fromEntries(
      raw.map((entry) => {
        const [key, ...value] = String(entry).split('=');
        return [key, value.join('=')];
      }),
    );
  }
  return Object.fromEntries(
    Object.entries(raw as Record<string, unknown>).map(([k, v]) => [k, String(v ?? '')]),
  );
}

/** The container paths of compose `volumes`, short (`source:target[:mode]`) or long (`target:`). */
function volumeTargets(raw: unknown): string[] {
  if (!Array.isArray(raw)) return [];
  return raw.map((v) =>
    typeof v === 'string' ? (v.split(':')[1] ?? v) : String((v as { target?: unknown }).target),
  );
}

/**
 * A service as docker-compose.yml declares it, so a test that starts a container runs the image the
 * compose file names (one place for it).
 */
export async function composeService(name: string): Promise<ComposeService> {
  const file = new URL('../../docker-compose.yml', import.meta.url);
  // `<<: *pds` merge keys are YAML 1.1; docker compose reads them, so this does too.
  const { services } = parse(await readFile(file, 'utf8'), { merge: true }) as {
    services: Record<
      string,
      { image?: string; environment?: unknown; command?: string[]; volumes?: unknown }
    >;
  };
  const service = services[name];
  if (!service?.image) throw new Error(`docker-compose.yml has no image for the ${name} service`);
  return {
    image: service.image,
    environment: composeEnvironment(service.environment),
    command: service.command ?? [],
    volumeTargets: volumeTargets(service.volumes),
  };
}

/** An engine in a container this process started, and the URL a client on this machine uses. */
export interface EngineContainer {
  url: string;
  container: StartedTestContainer;
  stop(): Promise<void>;
}

/**
 * EventStoreDB as docker-compose.yml runs it: its image and environment, nothing added. Its data goes
 * where the image keeps it (`EVENTSTORE_IMAGE_DATA`, a volume), so it survives a restart of the container.
 */
export function eventStoreDefinition(service: ComposeService): {
  image: string;
  environment: Record<string, string>;
} {
  return { image: service.image, environment: { ...service.environment } };
}

/**
 * MongoDB as docker-compose.yml runs it (`--replSet rs0 --bind_ip_all`), listening on `port` inside its
 * container as outside: the script that initiates the one-member set under the name `host:port`, and
 * the replica-set URL a client uses.
 */
export function mongoReplicaSetDefinition(service: ComposeService, port: number) {
  const replicaSet = service.command[service.command.indexOf('--replSet') + 1];
  if (!service.command.includes('--replSet') || !replicaSet) {
    throw new Error(
      'docker-compose.yml runs mongo without --replSet <name>: the read store needs a replica set',
    );
  }
  return {
    image: service.image,
    command: [...service.command, '--port', String(port)],
    replicaSet,
    initiate: (host: string) =>
      `rs.initiate({ _id: '${replicaSet}', members: [{ _id: 0, host: '${host}:${port}' }] })`,
    url: (host: string) => `mongodb://${host}:${port}/?replicaSet=${replicaSet}`,
  };
}

/** `url` naming database `name` (a MongoDB URL's path). */
export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * The host a client on this machine reaches a container's published ports by. Docker publishes them
 * on IPv4; `localhost` may resolve to ::1 first.
 */
function hostOf(container: StartedTestContainer): string {
  const host = container.getHost();
  return host === 'localhost' ? '127.0.0.1' : host;
}

/** A TCP port free on this machine now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP port was given');
  return address.port;
}

/** Starts a container bound to a host port picked free, picking again when it was taken meanwhile. */
async function onFreePort(
  start: (port: number) => Promise<StartedTestContainer>,
): Promise<{ container: StartedTestContainer; port: number }> {
  for (let pick = 1; ; pick++) {
    const port = await freePort();
    try {
      return { container: await start(port), port };
    } catch (err) {
      const taken = /port is already allocated|address already in use/i.test((err as Error).message);
      if (!taken || pick >= PORT_PICKS) throw err;
    }
  }
}

/** EventStoreDB of docker-compose.yml in a container, its data on disk. */
export async function startEventStore(): Promise<EngineContainer> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const { image, environment } = eventStoreDefinition(await composeService('eventstore'));
  const { container, port } = await onFreePort((hostPort) =>
    new GenericContainer(image)
      .withEnvironment(environment)
      .withExposedPorts({ container: ESDB_HTTP_PORT, host: hostPort })
      .withWaitStrategy(
        Wait.forHttp('/health/live', ESDB_HTTP_PORT).forStatusCodeMatching((s) => s >= 200 && s < 300),
      )
      .withStartupTimeout(ENGINE_STARTUP_MS)
      .start(),
  );
  return {
    url: `esdb://${hostOf(container)}:${port}?tls=false`,
    container,
    stop: async () => {
      await container.stop();
    },
  };
}

/** Runs `mongosh --eval` in a MongoDB container listening on `port`; answers what it printed. */
export async function mongosh(
  container: StartedTestContainer,
  port: number,
  script: string,
): Promise<string> {
  const result = await container.exec(['mongosh', '--port', String(port), '--quiet', '--eval', script]);
  if (result.exitCode !== 0) throw new Error(`mongosh failed: ${result.output}`);
  return result.stdout.trim();
}

/**
 * MongoDB of docker-compose.yml in a container: the one-node replica set initiated, its member named
 * by the host and port this machine reaches it at, and a primary elected.
 */
export async function startMongoReplicaSet(): Promise<EngineContainer> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const service = await composeService('mongo');
  const { container, port } = await onFreePort((hostPort) =>
    new GenericContainer(service.image)
      .withCommand(mongoReplicaSetDefinition(service, hostPort).command)
      .withExposedPorts({ container: hostPort, host: hostPort })
      .withWaitStrategy(Wait.forLogMessage(/Waiting for connections/))
      .withStartupTimeout(ENGINE_STARTUP_MS)
      .start(),
  );
  const definition = mongoReplicaSetDefinition(service, port);
  const host = hostOf(container);
  try {
    await mongosh(container, port, definition.initiate(host));
    for (let i = 0; (await mongosh(container, port, 'db.hello().isWritablePrimary')) !== 'true'; i++) {
      if (i >= PRIMARY_CHECKS) throw new Error('the one-node replica set elected no primary');
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } catch (err) {
    await container.stop();
    throw err;
  }
  return {
    url: definition.url(host),
    container,
    stop: async () => {
      await container.stop();
    },
  };
}

/** MongoDB of docker-compose.yml without its `--replSet`: a standalone server, which the read store refuses. */
export async function startMongoStandalone(): Promise<EngineContainer> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const { image } = await composeService('mongo');
  const port = 27017;
  const container = await new GenericContainer(image)
    .withCommand(['--bind_ip_all'])
    .withExposedPorts(port)
    .withWaitStrategy(Wait.forLogMessage(/Waiting for connections/))
    .withStartupTimeout(ENGINE_STARTUP_MS)
    .start();
  return {
    url: `mongodb://${hostOf(container)}:${container.getMappedPort(port)}/`,
    container,
    stop: async () => {
      await container.stop();
    },
  };
}
