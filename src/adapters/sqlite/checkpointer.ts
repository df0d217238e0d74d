/**
 * WAL checkpoints on a thread of their own (SQLite).
 *
 * A checkpoint copies the WAL's pages into the database file and fsyncs both. By default SQLite runs one inside
 * the COMMIT that takes the WAL past 1,000 pages, on the committing connection — here, on an event loop, which
 * then serves nothing until the copy and two fsyncs are done. Measured (bench:delivery, SQLite, in bulk): with no
 * checkpoints at all, attempts/s rose by 18 %. So a worker thread with a connection of its own runs PASSIVE
 * checkpoints (they never block readers or writers, and copy what no reader still needs) every CHECKPOINT_MS.
 * The writers' own automatic checkpoint stays as a backstop at BACKSTOP_PAGES, should this thread fall behind.
 *
 * The thread runs plain JavaScript with better-sqlite3 only (no loader needed). It is stopped by close(), before
 * the last connection closes (which checkpoints the rest).
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * A pass copies each page changed since the last one once, however often it changed, so a longer interval copies
 * the hot pages (queue rows, index leaves) fewer times. Measured (bench:delivery, SQLite, in bulk, syscalls of the
 * checkpointing thread per delivery): 6.3 every 50 ms, 2.4 every 500 ms. The WAL holds what is written between
 * passes: ~4 frames per delivery, so ~5,000 frames at 5,000 deliveries/s, under BACKSTOP_PAGES.
 */
export const CHECKPOINT_MS = 250;
/** Pages in the WAL above which the writers checkpoint themselves (4 KiB pages: 40 MiB). */
export const BACKSTOP_PAGES = 10_000;

export interface Checkpointer {
  close(): Promise<void>;
}

const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.sqlite);
const db = new Database(workerData.filename);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = FULL');
let stopped = false;
parentPort.on('message', () => { stopped = true; });
const pass = () => {
  if (stopped) { db.close(); parentPort.postMessage('closed'); return; }
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch (err) { parentPort.postMessage({ error: String(err) }); }
  setTimeout(pass, workerData.everyMs);
};
pass();
`;

export function startCheckpointer(filename: string, onError: (message: string) => void): Checkpointer {
  const worker = new Worker(THREAD, {
    eval: true,
    workerData: {
      filename,
      everyMs: CHECKPOINT_MS,
      sqlite: createRequire(import.meta.url).resolve('better-sqlite3'),
    },
  });
  worker.unref();
  const closed = new Promise<void>((resolve) => {
    worker.on('message', (m: unknown) => {
      if (m === 'closed') resolve();
      else if (m && typeof m === 'object' && 'error' in m) onError(String(m.error));
    });
    worker.on('exit', () => resolve());
    worker.on('error', (err) => {
      onError(String(err));
      resolve();
    });
  });
  return {
    async close() {
      worker.postMessage('stop');
      await closed;
      await worker.terminate();
    },
  };
}
