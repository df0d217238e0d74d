import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { createWriteLock } from './write-lock.ts';

// The other thread runs the same protocol as write-lock.ts (plain JavaScript: eval'd workers have no TS loader).
const OTHER_THREAD = `
const { workerData, parentPort } = require('node:worker_threads');
const cell = new Int32Array(workerData.lock, 0, 1);
const counter = new Int32Array(workerData.counter, 0, 1);
const go = new Int32Array(workerData.counter, 4, 1);
parentPort.postMessage('ready');
Atomics.wait(go, 0, 0); // both threads start together, so their rounds overlap
for (let i = 0; i < workerData.rounds; i++) {
  while (Atomics.compareExchange(cell, 0, 0, 1) !== 0) Atomics.wait(cell, 0, 1, 50);
  const v = counter[0]; // a read-modify-write that only the lock keeps from losing updates
  for (let k = 0; k < 50; k++) Atomics.load(counter, 0);
  counter[0] = v + 1;
  Atomics.store(cell, 0, 0);
  Atomics.notify(cell, 0, 1);
}
parentPort.postMessage('done');
`;

describe('write lock (between threads)', () => {
  it('excludes the other thread: no increment under the lock is lost', async () => {
    const lock = createWriteLock();
    const counterBuffer = new SharedArrayBuffer(8);
    const counter = new Int32Array(counterBuffer, 0, 1);
    const go = new Int32Array(counterBuffer, 4, 1);
    const rounds = 20_000;
    const worker = new Worker(OTHER_THREAD, {
      eval: true,
      workerData: { lock: lock.buffer, counter: counterBuffer, rounds },
    });
    const done = new Promise((resolve, reject) => {
      worker.on('message', (m) => m === 'done' && resolve(m));
      worker.on('error', reject);
    });
    await new Promise((resolve) => worker.once('message', resolve)); // ready
    Atomics.store(go, 0, 1);
    Atomics.notify(go, 0);
    for (let i = 0; i < rounds; i++) {
      lock.acquire();
      const v = counter[0] as number;
      for (let k = 0; k < 50; k++) Atomics.load(counter, 0);
      counter[0] = v + 1;
      lock.release();
    }
    await done;
    await worker.terminate();
    expect(counter[0]).toBe(2 * rounds);
  });

  it('a second lock on the same memory is the same lock', () => {
    const a = createWriteLock();
    const b = createWriteLock(a.buffer);
    a.acquire();
    expect(Atomics.load(new Int32Array(b.buffer), 0)).toBe(1);
    a.release();
    b.acquire(); // free again: returns at once
    b.release();
  });

  it('released() settles at once when the lock is free, and on release (not before) when it is held', async () => {
    const lock = createWriteLock();
    await lock.released(); // free: settles at once
    const other = createWriteLock(lock.buffer); // the other thread's view of the same lock
    other.acquire();
    expect(lock.held()).toBe(true);
    let settled = false;
    const waiting = lock.released().then(() => {
      settled = true;
    });
    // The thread is not blocked: timers and I/O callbacks run while the lock is held.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(settled).toBe(false);
    other.release();
    await waiting;
    expect(settled).toBe(true);
    expect(lock.held()).toBe(false);
  });

  it('acquire() gives up after its deadline instead of blocking the thread for ever', () => {
    const lock = createWriteLock();
    const other = createWriteLock(lock.buffer);
    other.acquire();
    const started = Date.now();
    expect(() => lock.acquire(120)).toThrow(/write lock has been held by thread \d+ for 120 ms/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(120);
    other.release();
    lock.acquire();
    lock.release();
  });

  it("a thread that exited holding the lock: releaseIfHeldBy(its id) frees it, and only that thread's", async () => {
    const lock = createWriteLock();
    const worker = new Worker(
      `const { workerData, threadId, parentPort } = require('node:worker_threads');
       const cell = new Int32Array(workerData.lock, 0, 1);
       Atomics.compareExchange(cell, 0, 0, threadId + 1); // takes the lock, as acquire() does, and never releases
       parentPort.postMessage('held');`,
      { eval: true, workerData: { lock: lock.buffer } },
    );
    const id = worker.threadId;
    await new Promise((resolve) => worker.once('message', resolve));
    await new Promise((resolve) => worker.once('exit', resolve));
    expect(lock.held()).toBe(true);
    lock.releaseIfHeldBy(id + 1000); // another thread's id: not the holder, nothing changes
    expect(lock.held()).toBe(true);
    lock.releaseIfHeldBy(id);
    expect(lock.held()).toBe(false);
    lock.acquire(100);
    lock.release();
  });
});
