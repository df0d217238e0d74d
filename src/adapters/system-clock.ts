import { randomFillSync } from 'node:crypto';
import type { Clock, Random } from '../ports/clock.ts';

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Random bytes from the CSPRNG, drawn from a pool refilled 8 KiB at a time: an id needs 10 bytes per event,
 * delivery and attempt, and one `randomBytes` call per id costs far more than the bytes (measured ~20 µs a call
 * under delivery load, several percent of a delivery's CPU). Callers get their own copy, never a view of the pool.
 */
const POOL_BYTES = 8192;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let offset = POOL_BYTES;

function randomBytesPooled(n: number): Buffer {
  const out = Buffer.allocUnsafe(n);
  if (n > POOL_BYTES) return randomFillSync(out);
  if (offset + n > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  pool.copy(out, 0, offset, offset + n);
  // Used bytes are overwritten so that no later caller (or heap dump) can read another caller's bytes from the pool.
  pool.fill(0, offset, offset + n);
  offset += n;
  return out;
}

export const systemRandom: Random = {
  bytes: randomBytesPooled,
  float: () => Math.random(),
};
