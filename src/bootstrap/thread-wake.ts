/**
 * A wake-up from one thread to another through shared memory: the API thread's fan-out tells the pipeline thread
 * that deliveries were created (pipeline-thread.ts). It replaces a message per fan-out pass: a message is
 * serialised, queued, deserialised and dispatched as an event on the other side, while this is one atomic write, and
 * a notify only when the other thread has not been woken since its last look. Pokes made before the other thread
 * looks again are one wake-up, which is all a Signal needs (a poke wakes every waiter; it carries no data).
 */
import { waitAsync } from '../adapters/wait-async.ts';

const IDLE = 0;
const POKED = 1;

/**
 * How long one wait lasts before it is renewed. Only bounds how long a stopped listener's last wait stays
 * registered; a poke ends a wait at once.
 */
const WAIT_MS = 1_000;

/** The poking side: `buffer` goes to the other thread (listenForWakes there). */
export function createThreadWake(buffer: SharedArrayBuffer = new SharedArrayBuffer(4)) {
  const cell = new Int32Array(buffer, 0, 1);
  return {
    buffer,
    poke(): void {
      // Only the first poke since the listener's last look notifies; the rest find the cell already set.
      if (Atomics.compareExchange(cell, 0, IDLE, POKED) === IDLE) Atomics.notify(cell, 0);
    },
  };
}

/**
 * The listening side: calls `onWake` once for any number of pokes made since its previous call, on this thread's
 * event loop. Returns a function that stops listening.
 */
export function listenForWakes(buffer: SharedArrayBuffer, onWake: () => void): () => void {
  const cell = new Int32Array(buffer, 0, 1);
  let listening = true;
  const loop = async () => {
    while (listening) {
      // Cleared before onWake runs: a poke made during onWake sets the cell again and is seen by the next wait.
      if (Atomics.exchange(cell, 0, IDLE) === POKED) onWake();
      const wait = waitAsync(cell, 0, IDLE, WAIT_MS);
      if (wait.async) await wait.value;
    }
  };
  void loop();
  return () => {
    listening = false;
  };
}
