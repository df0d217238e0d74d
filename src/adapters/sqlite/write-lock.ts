/**
 * A mutex between the threads of one process that write the same SQLite file (the API thread and the pipeline
 * thread, bootstrap/pipeline-thread.ts), on a SharedArrayBuffer. SQLite serialises writers itself, but a writer
 * that finds the lock taken retries through the busy handler, which sleeps (1, 2, 5 … ms) — far longer than the
 * other thread's transaction. Waiting here wakes the moment the holder releases. Blocking: the thread waits
 * (Atomics.wait), as it would inside SQLite; a turn's transaction holds it for a few milliseconds at most.
 */
export interface WriteLock {
  acquire(): void;
  release(): void;
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
      Atomics.notify(cell, 0, 1);
    },
  };
}
