/**
 * A child process running one `startLoad` (load.ts) until its parent says stop, then answering with
 * the load's figures: the load generator's work stays off the process that measures. (Not a worker
 * thread: autocannon takes a worker thread for one of its own and answers with raw histograms.)
 */
import { type Load, type LoadOptions, type LoadProcessMessage, startLoad } from './load.ts';

if (!process.send) throw new Error('load-process.ts runs as a child process (startLoadElsewhere in load.ts)');
const send = process.send.bind(process);
let answered = false;
let load: ReturnType<typeof startLoad> | undefined;
const tell = (message: LoadProcessMessage, callback: () => void = () => {}) => send(message, callback);
const answer = (figures: Load) => {
  if (answered) return;
  answered = true;
  tell({ figures }, () => process.disconnect());
};
process.on('message', (message: { start?: { url: string; options: LoadOptions }; stop?: true }) => {
  if (message.start) {
    load = startLoad(message.start.url, message.start.options);
    // A load that ends before its warm-up only answers its figures (the parent then sees the exit).
    load.running.then(
      () => tell({ running: true }),
      () => {},
    );
    load.done.then(answer);
  } else if (message.stop) load?.stop().then(answer);
});
