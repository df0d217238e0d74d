import type { Random } from '../../src/ports/clock.ts';

/**
 * A deterministic Random for tests: mulberry32, a 32-bit PRNG that is small, fast and well distributed enough
 * for jitter and fixture bytes. Never use it outside tests — it is trivially predictable, so anything it
 * "randomises" (secrets, keys, ids) is guessable by design.
 */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const next32 = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  return {
    float: () => next32() / 2 ** 32,
    bytes: (n: number) => {
      const out = Buffer.alloc(n);
      for (let i = 0; i < n; i += 4) {
        const word = next32();
        for (let j = 0; j < 4 && i + j < n; j++) out[i + j] = (word >>> (8 * j)) & 0xff;
      }
      return out;
    },
  };
}
