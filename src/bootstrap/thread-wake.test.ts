import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { createThreadWake, listenForWakes } from './thread-wake.ts';

// The poking thread runs the same protocol as createThreadWake().poke (plain JavaScript: eval'd workers have no TS
// loader). It counts its pokes in `seq` before each one, so a wake can tell which pokes it has seen.
const POKING_THREAD = `
const { workerData, parentPort } = require('node:worker_threads');
const cell = new Int32Array(workerData.wake, 0, 1);
const seq = new Int32Array(workerData.seq, 0, 1);
const poke = () => { if (Atomics.compareExchange(cell, 0, 0, 1) === 0) Atomics.notify(cell, 0); };
parentPort.on('message', (n) => {
  for (let i = 0; i < n; i++) {
    Atomics.add(seq, 0, 1);
    poke();
  }
  parentPort.postMessage('poked');
});
`;

function pokingThread(wake: SharedArrayBuffer, seq: SharedArrayBuffer) {
  const worker = new Worker(POKING_THREAD, { eval: true, workerData: { wake, seq } });
  return {
    poke: (n: number) =>
      new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
        worker.postMessage(n);
      }),
    stop: () => worker.terminate(),
  };
}

const until = async (check: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 2));
  return check();
};

describe('thread wake', () => {
  it("a poke from another thread wakes the listener at once, not at its wait's renewal", async () => {
    const wake = createThreadWake();
    const seq = new SharedArrayBuffer(4);
    const other = pokingThread(wake.buffer, seq);
    const wakes: number[] = [];
    const stop = listenForWakes(wake.buffer, () => wakes.push(Date.now()));
    try {
      await new Promise((resolve) => setTimeout(resolve, 20)); // the listener is waiting
      // A round trip that pokes nothing: the poking thread is up and running, so its start-up is not timed below.
      await other.poke(0);
      expect(wakes).toEqual([]);
      const poked = Date.now();
      await other.poke(1);
      expect(await until(() => wakes.length === 1, 2_000)).toBe(true);
      expect((wakes[0] as number) - poked).toBeLessThan(500); // the renewal is 1 s
    } finally {
      stop();
      await other.stop();
    }
  });

  it('a burst of pokes is fewer wakes, and the last wake comes after the last poke', async () => {
    const wake = createThreadWake();
    const seqBuffer = new SharedArrayBuffer(4);
    const seq = new Int32Array(seqBuffer);
    const other = pokingThread(wake.buffer, seqBuffer);
    const seen: number[] = [];
    const stop = listenForWakes(wake.buffer, () => seen.push(Atomics.load(seq, 0)));
    try {
      await other.poke(10_000);
      expect(await until(() => seen.at(-1) === 10_000, 2_000)).toBe(true);
      expect(seen.length).toBeGreaterThanOrEqual(1);
      expect(seen.length).toBeLessThan(10_000);
    } finally {
      stop();
      await other.stop();
    }
  });

  it('a poke made while the listener handles a wake is not lost', async () => {
    const wake = createThreadWake();
    let wakes = 0;
    const stop = listenForWakes(wake.buffer, () => {
      wakes++;
      if (wakes < 5) wake.poke(); // as if fan-out poked again meanwhile
    });
    try {
      wake.poke();
      // Each poke is seen at once, none at the 1 s renewal.
      expect(await until(() => wakes === 5, 500)).toBe(true);
    } finally {
      stop();
    }
  });

  it('a stopped listener is not woken', async () => {
    const wake = createThreadWake();
    let wakes = 0;
    const stop = listenForWakes(wake.buffer, () => wakes++);
    wake.poke();
    expect(await until(() => wakes === 1, 500)).toBe(true);
    stop();
    wake.poke();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(wakes).toBe(1);
  });
});
