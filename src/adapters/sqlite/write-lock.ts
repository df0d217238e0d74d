/**
 * A mutex between the threads of one process that write the same SQLite file (the API thread and the pipeline
 * thread, bootstrap/pipeline-thread.ts), on a SharedArrayBuffer. SQLite serialises writers itself, but a writer
 * that finds the lock taken retries through the busy handler, which sleeps (1, 2, 5 … ms) — far longer than the
 * other thread's transaction. Waiting here wakes the moment the holder releases. acquire() blocks the thread
 * (Atomics.wait), as SQLite would; a turn's transaction holds the lock for a few milliseconds at most, and the turn
 * commit (turn-commit.ts) first waits for released() without blocking, so that its thread serves requests meanwhile.
 */
import { waitAsync } from '../wait-async.ts';

export interface WriteLock {
  acquire(): void;
  release(): void;
  /**
   * Settles when the holder releases the lock (at once if it is free now, after 50 ms at most), without blocking
   * the thread: a caller with other work to do waits here, then acquires. Another thread may take the lock in
   * between; acquire() still decides.
   */
  released(): Promise<void>;
  /** Whether a thread holds the lock now (a hint: it may change at once). */
  held(): boolean;
  /** The shared memory, to hand to the other thread (createWriteLock(buffer) there). */
  readonly buffer: SharedArrayBuffer;
}

const FREE = 0;
const HELD = 1;

export function createWriteLock(buffer: SharedArrayBuffer = new SharedArrayBuffer(4)): WriteLock {
  const cell = new Int32Array(buffer, 0, 1);
  return {
    buffer,
    acquire() {
      while (Atomics.compareExchange(cell, 0, FREE, HELD) !== FREE) Atomics.wait(cell, 0, HELD, 50);
    },
    release() {
      Atomics.store(cell, 0, FREE);
      // Every waiter: a blocked acquire() and a released() of the other thread may both be waiting.
      Atomics.notify(cell, 0);
    },
    held: () => Atomics.load(cell, 0) === HELD,
    released() {
      const wait = waitAsync(cell, 0, HELD, 50);
      return wait.async ? wait.value.then(() => undefined) : Promise.resolve();
    },
  };
}
