/**
 * A thread of the bench that checkpoints an embedded store file (`bench/checkpointer-thread.ts`), as role
 * `all`'s projector thread does for its main and dispatcher threads (cli/store-options.ts): what the
 * benches connect as one of those threads gets the same arrangement.
 */
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';

export async function startCheckpointer(file: string): Promise<{ stop(): Promise<void> }> {
  const thread = new Worker(new URL('./checkpointer-thread.ts', import.meta.url), { workerData: { file } });
  await once(thread, 'message');
  return {
    async stop() {
      thread.postMessage('stop');
      await once(thread, 'exit');
    },
  };
}
