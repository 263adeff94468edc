/**
 * A child process running one `startLoad` (load.ts) until its parent says stop, then answering with
 * the load's figures: the load generator's work stays off the process that measures. (Not a worker
 * thread: autocannon takes a worker thread for one of its own and answers with raw histograms.)
 */
import { type LoadOptions, startLoad } from './load.ts';

if (!process.send) throw new Error('load-process.ts runs as a child process (startLoadElsewhere in load.ts)');
const send = process.send.bind(process);
let answered = false;
let load: ReturnType<typeof startLoad> | undefined;
const answer = (figures: unknown) => {
  if (answered) return;
  answered = true;
  send(figures, () => process.disconnect());
};
process.on('message', (message: { start?: { url: string; options: LoadOptions }; stop?: true }) => {
  if (message.start) {
    load = startLoad(message.start.url, message.start.options);
    load.done.then(answer);
  } else if (message.stop) load?.stop().then(answer);
});
