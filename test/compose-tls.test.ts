/**
 * `docker-compose.tls.yml`, read as a file over `docker-compose.yml` (no Docker engine needed), merged
 * as `docker compose -f docker-compose.yml -f docker-compose.tls.yml` merges them: EventStoreDB runs
 * secure on certificates generated once by the vendor's tool, its healthcheck speaks TLS trusting
 * that CA, and every pds service connects with tls=true and a tlsCAFile it mounts read-only, which the
 * generator fills (docs/operations.md, "EventStoreDB").
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConnectionString } from '@eventstore/db-client/dist/Client/parseConnectionString.js';
import test from 'ava';
import { parse } from 'yaml';
import { parseConfig } from '../cli/config.ts';
import { filesNamedBy } from '../cli/connection-files.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PDS_SERVICES = ['api', 'projector', 'dispatcher', 'sandbox-seed'];

interface Service {
  image?: string;
  user?: string;
  entrypoint?: string;
  command?: string[] | string;
  environment?: Record<string, string>;
  volumes?: string[];
  healthcheck?: { test?: string[] | string };
  depends_on?: Record<string, { condition: string }>;
  restart?: string;
}

interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

const load = async (file: string): Promise<ComposeFile> =>
  parse(await readFile(path.join(ROOT, file), 'utf8'), { merge: true });

/** What compose makes of a service given in both files: maps merged key by key, mounts by target, the rest replaced. */
function mergeService(base: Service = {}, over: Service = {}): Service {
  const target = (mount: string) => mount.split(':')[1];
  const overTargets = new Set((over.volumes ?? []).map(target));
  return {
    ...base,
    ...over,
    environment: { ...base.environment, ...over.environment },
    depends_on: { ...base.depends_on, ...over.depends_on },
    volumes: [...(base.volumes ?? []).filter((m) => !overTargets.has(target(m))), ...(over.volumes ?? [])],
  };
}

async function merged(): Promise<ComposeFile> {
  const base = await load('docker-compose.yml');
  const tls = await load('docker-compose.tls.yml');
  const names = new Set([...Object.keys(base.services), ...Object.keys(tls.services)]);
  return {
    services: Object.fromEntries([...names].map((n) => [n, mergeService(base.services[n], tls.services[n])])),
    volumes: { ...base.volumes, ...tls.volumes },
  };
}

const text = (value: string[] | string | undefined) =>
  Array.isArray(value) ? value.join(' ') : (value ?? '');

/** The named volume mounted at the directory holding `file`, and whether read-only. */
function mountOf(
  service: Service,
  file: string,
): { volume: string; target: string; readOnly: boolean } | undefined {
  for (const mount of service.volumes ?? []) {
    const [volume, target, mode] = mount.split(':');
    if (file.startsWith(`${target}/`)) return { volume, target, readOnly: mode === 'ro' };
  }
  return undefined;
}

/** Where the generator's mount of `volume` puts what the service sees at `file`. */
function generatorPath(generator: Service, service: Service, file: string): string {
  const mount = mountOf(service, file);
  const own = (generator.volumes ?? []).map((m) => m.split(':')).find(([volume]) => volume === mount?.volume);
  if (!mount || !own) throw new Error(`${file}: no volume the generator mounts`);
  return `${own[1]}${file.slice(mount.target.length)}`;
}

/** The value compose gives `${NAME:?message}` when NAME is set to `value`. */
const resolve = (template: string, name: string, value: string) =>
  template.replace(new RegExp(`\\$\\{${name}:\\?[^}]*\\}`, 'g'), value);

test('the certificates are generated once, by the vendor-documented es-gencert-cli image, for the names the services use', async (t) => {
  const { services, volumes } = await merged();
  const gen = services['eventstore-certs'];
  t.regex(gen.image ?? '', /^eventstore\/es-gencert-cli:\d+\.\d+\.\d+$/);
  t.is(gen.restart, 'no');
  const script = text(gen.command);
  t.regex(script, /if \[ ! -f (\S+) \]; then .*create-ca .*create-node .*fi;/, 'only when not generated yet');
  t.regex(
    script,
    /create-node .*-dns-names eventstore,localhost\b/,
    'the host the services dial, and the healthcheck’s',
  );
  t.truthy(volumes && 'eventstore-certs' in volumes && 'eventstore-ca' in volumes);
  // The server's user (uid 1000 in the vendor's image) owns the node's key; the keys are private.
  t.regex(script, /chown -R 1000:1000 \/certs\/node;/);
  t.regex(script, /chmod 0600 \/certs\/ca\/ca\.key \/certs\/node\/node\.key;/);
});

test('EventStoreDB runs secure on the generated certificates, after they exist, with a healthcheck over TLS', async (t) => {
  const { services } = await merged();
  const es = services.eventstore;
  const gen = services['eventstore-certs'];
  const env = es.environment ?? {};
  t.is(env.EVENTSTORE_INSECURE, 'false');
  t.is(es.depends_on?.['eventstore-certs']?.condition, 'service_completed_successfully');
  const script = text(gen.command);
  // The vendor's 24.10 settings (docs/server/security/protocol-security.md), on the generator's files.
  const files = {
    EVENTSTORE_CERTIFICATE_FILE: /create-node .*-out (\S+) /.exec(script)?.[1] ?? '',
    EVENTSTORE_CERTIFICATE_PRIVATE_KEY_FILE: /create-node .*-out (\S+) /.exec(script)?.[1] ?? '',
    EVENTSTORE_TRUSTED_ROOT_CERTIFICATES_PATH: /create-ca -out (\S+);/.exec(script)?.[1] ?? '',
  };
  t.is(env.EVENTSTORE_CERTIFICATE_FILE, `${files.EVENTSTORE_CERTIFICATE_FILE}/node.crt`);
  t.is(
    env.EVENTSTORE_CERTIFICATE_PRIVATE_KEY_FILE,
    `${files.EVENTSTORE_CERTIFICATE_PRIVATE_KEY_FILE}/node.key`,
  );
  t.is(env.EVENTSTORE_TRUSTED_ROOT_CERTIFICATES_PATH, files.EVENTSTORE_TRUSTED_ROOT_CERTIFICATES_PATH);
  for (const name of Object.keys(files)) {
    const file = env[name] ?? '';
    const mount = mountOf(es, `${file}/`) ?? mountOf(es, file);
    t.truthy(mount, `${name}: ${file} is in a volume the server mounts`);
    t.true(mount?.readOnly, name);
    t.is(generatorPath(gen, es, file), file, `${name}: the generator writes it there`);
  }
  const check = text(es.healthcheck?.test);
  t.regex(check, /https:\/\/localhost:2113\/health\/live/);
  t.notRegex(check, /--insecure|-k\b|http:\/\//, 'verifies the certificate');
  const ca = /--cacert (\S+)/.exec(check)?.[1] ?? '';
  t.is(path.posix.dirname(ca), env.EVENTSTORE_TRUSTED_ROOT_CERTIFICATES_PATH);
  t.regex(
    script,
    new RegExp(`create-ca -out ${path.posix.dirname(ca)};`),
    'the CA certificate the generator makes',
  );
  t.regex(env.EVENTSTORE_DEFAULT_ADMIN_PASSWORD ?? '', /^\$\{EVENTSTORE_ADMIN_PASSWORD:\?/);
});

test('every pds service connects with tls=true and a tlsCAFile it mounts read-only, which the generator fills with the CA alone', async (t) => {
  const { services } = await merged();
  const gen = services['eventstore-certs'];
  const script = text(gen.command);
  for (const name of PDS_SERVICES) {
    const s = services[name];
    const url = resolve(s.environment?.PDS_EVENT_STORE ?? '', 'EVENTSTORE_ADMIN_PASSWORD', 'sample-password');
    // As the EventStoreDB client reads it: TLS on, the CA from that file, the admin user.
    const options = parseConnectionString(url);
    t.is(options.tls, true, name);
    t.like(options, {
      hosts: [{ address: 'eventstore', port: 2113 }],
      defaultCredentials: { username: 'admin' },
    });
    const ca = options.tlsCAFile ?? '';
    t.deepEqual(filesNamedBy(url), [{ option: 'tlsCAFile', file: ca }], `${name}: the start checks it`);
    const mount = mountOf(s, ca);
    t.truthy(mount, `${name}: ${ca} is in a volume it mounts`);
    t.true(mount?.readOnly, `${name}: read-only`);
    t.is(mount?.volume, 'eventstore-ca', name);
    // The generator copies the CA's certificate, not its key, into that volume, where the service reads it.
    t.true(script.includes(`cp /certs/ca/ca.crt ${generatorPath(gen, s, ca)};`), name);
    t.false(
      (s.volumes ?? []).some((m) => m.startsWith('eventstore-certs:')),
      `${name}: no keys`,
    );
    // The rest of the service's configuration stays valid.
    const env = Object.fromEntries(
      Object.entries(s.environment ?? {}).map(([k, v]) => [
        k,
        v
          .replace(/^\$\{PDS_OPERATOR_TOKEN:\?[^}]*\}$/, 'operator-token-for-the-test')
          .replace(/^\$\{PDS_SECRET_KEY:\?[^}]*\}$/, Buffer.alloc(32, 1).toString('base64'))
          .replace(/^\$\{\w+:-([^}]*)\}$/, '$1'),
      ]),
    );
    t.is(parseConfig({ ...env, PDS_EVENT_STORE: url }).eventStoreUrl, url, name);
  }
});
