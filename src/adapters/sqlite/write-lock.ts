/**
 * A mutex between the threads of one process that write the same SQLite file (the API thread and the pipeline
 * thread, bootstrap/pipeline-thread.ts), on a SharedArrayBuffer. SQLite serialises writers itself, but a writer
 * that finds the lock taken retries through the busy handler, which sleeps (1, 2, 5 … ms) — far longer than the
 * other thread's transaction. Waiting here wakes the moment the holder releases. acquire() blocks the thread
 * (Atomics.wait), as SQLite would; a turn's transaction holds the lock for a few milliseconds at most, and the turn
 * commit (turn-commit.ts) first waits for released() without blocking, so that its thread serves requests meanwhile.
 *
 * The cell holds the holder's thread id + 1 (0: free), so that a thread that died holding it (a pipeline thread
 * stopped for running out of memory in its turn) can be told apart and its lock freed (releaseIfHeldBy, on the
 * thread's 'exit'). acquire() gives up after ACQUIRE_DEADLINE_MS: blocked in Atomics.wait, the API thread could not
 * even run that 'exit' handler, and the process would neither serve nor stop.
 */
import { threadId } from 'node:worker_threads';
import { waitAsync } from '../wait-async.ts';

/** Far above any turn's transaction (milliseconds); reached only when the holder is gone or stuck. */
export const ACQUIRE_DEADLINE_MS = 30_000;

export interface WriteLock {
  /** Blocks until this thread holds the lock; throws after `deadlineMs` (the lock's, else ACQUIRE_DEADLINE_MS). */
  acquire(deadlineMs?: number): void;
  release(): void;
  /**
   * Settles when the holder releases the lock (at once if it is free now, after 50 ms at most), without blocking
   * the thread: a caller with other work to do waits here, then acquires. Another thread may take the lock in
   * between; acquire() still decides.
   */
  released(): Promise<void>;
  /** Whether a thread holds the lock now (a hint: it may change at once). */
  held(): boolean;
  /** Frees the lock if the thread `id` holds it: that thread has exited, and will never release it. */
  releaseIfHeldBy(id: number): void;
  /** The shared memory, to hand to the other thread (createWriteLock(buffer) there). */
  readonly buffer: SharedArrayBuffer;
}

const FREE = 0;

export function createWriteLock(
  buffer: SharedArrayBuffer = new SharedArrayBuffer(4),
  opts: { acquireDeadlineMs?: number } = {},
): WriteLock {
  const cell = new Int32Array(buffer, 0, 1);
  const me = threadId + 1;
  return {
    buffer,
    acquire(deadlineMs = opts.acquireDeadlineMs ?? ACQUIRE_DEADLINE_MS) {
      let giveUpAt: number | null = null;
      for (;;) {
        const holder = Atomics.compareExchange(cell, 0, FREE, me);
        if (holder === FREE) return;
        giveUpAt ??= Date.now() + deadlineMs;
        if (Date.now() >= giveUpAt) {
          throw new Error(`the SQLite write lock has been held by thread ${holder - 1} for ${deadlineMs} ms`);
        }
        Atomics.wait(cell, 0, holder, 50);
      }
    },
    release() {
      Atomics.store(cell, 0, FREE);
      // Every waiter: a blocked acquire() and a released() of the other thread may both be waiting.
      Atomics.notify(cell, 0);
    },
    releaseIfHeldBy(id) {
      if (Atomics.compareExchange(cell, 0, id + 1, FREE) === id + 1) Atomics.notify(cell, 0);
    },
    held: () => Atomics.load(cell, 0) !== FREE,
    released() {
      const holder = Atomics.load(cell, 0);
      if (holder === FREE) return Promise.resolve();
      const wait = waitAsync(cell, 0, holder, 50);
      return wait.async ? wait.value.then(() => undefined) : Promise.resolve();
    },
  };
}
