/**
 * How a connection hears of another process's appends: a watch of the file's WAL, held while any
 * reader waits (docs/operations.md, "Threads").
 *
 * A commit writes the WAL page by page, dozens of writes, and each write of a watched file wakes every
 * thread that watches it and costs the writer the telling. So the watch closes at the first write it
 * reports and is set again `recheckMs` later: a burst of writes wakes a thread once per `recheckMs`,
 * not once per page. The file itself is watched, not its directory, so that the writes of the other
 * databases beside it (the read store's) wake nobody here.
 *
 * Readers look (`look`) at the write, again when the watch is set again (what was written while it was
 * closed), and once more `recheckMs` after that: a write reported before its commit is published is
 * looked at again after it, however late in the closed window it came.
 */
import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname } from 'node:path';

export interface WalWatch {
  /** A reader starts waiting for appends: the WAL is watched while any does. */
  retain(): void;
  /** A reader stops waiting; returns false once none waits (other processes' appends go unheard). */
  release(): boolean;
  /** Whether other processes' appends are heard of: a reader waits and the file system lets us watch. */
  readonly active: boolean;
  close(): void;
}

export function watchWal(path: string, recheckMs: number, look: () => void): WalWatch {
  const walName = `${basename(path)}-wal`;
  let readers = 0;
  let watcher: FSWatcher | undefined;
  /** The file system refused the watch: only this process's appends wake the readers. */
  let unwatchable = false;
  /** The next look (and, after a reported write, the watch set again). */
  let timer: NodeJS.Timeout | undefined;

  const stopTimer = (): void => {
    clearTimeout(timer);
    timer = undefined;
  };

  /** The WAL itself; its directory (for the WAL's name) while it does not exist yet. */
  const arm = (): void => {
    try {
      try {
        watcher = watch(`${path}-wal`, { persistent: false }, written);
      } catch {
        watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
          if (file === walName) written();
        });
      }
      watcher.on('error', () => {});
    } catch {
      watcher = undefined;
      unwatchable = true;
    }
  };

  const disarm = (): void => {
    watcher?.close();
    watcher = undefined;
  };

  /** A write of the WAL: look now, and again when the watch is set again. */
  const written = (): void => {
    disarm();
    stopTimer();
    look();
    timer = setTimeout(() => {
      look();
      arm();
      // A commit written at the end of the closed window may be published just after the look above.
      timer = setTimeout(() => {
        timer = undefined;
        look();
      }, recheckMs).unref();
    }, recheckMs).unref();
  };

  return {
    retain() {
      readers += 1;
      if (readers === 1 && !unwatchable) arm();
    },
    release() {
      readers -= 1;
      if (readers > 0) return true;
      disarm();
      stopTimer();
      return false;
    },
    get active() {
      return readers > 0 && !unwatchable;
    },
    close() {
      readers = 0;
      disarm();
      stopTimer();
    },
  };
}
