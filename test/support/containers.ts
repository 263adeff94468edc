/**
 * Whether the real-engine contract runs can start containers here (testcontainers' runtime probe), and
 * what they start: the services of docker-compose.yml.
 */
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';

const RUNTIME_PROBE_MS = 15_000;

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

/** A service of docker-compose.yml: its image and environment. */
export interface ComposeService {
  image: string;
  environment: Record<string, string>;
}

/**
 * A service as docker-compose.yml declares it, so a test that starts a container runs the image the
 * compose file names (one place for it).
 */
export async function composeService(name: string): Promise<ComposeService> {
  const file = new URL('../../docker-compose.yml', import.meta.url);
  // `<<: *pds` merge keys are YAML 1.1; docker compose reads them, so this does too.
  const { services } = parse(await readFile(file, 'utf8'), { merge: true }) as {
    services: Record<string, Partial<ComposeService> | undefined>;
  };
  const service = services[name];
  if (!service?.image) throw new Error(`docker-compose.yml has no image for the ${name} service`);
  return { image: service.image, environment: service.environment ?? {} };
}
