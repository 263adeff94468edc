/** Whether the real-engine contract runs can start containers here (testcontainers' runtime probe). */
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
