import { randomBytes } from 'node:crypto';
import type { Clock, Random } from '../ports/clock.ts';

export const systemClock: Clock = { now: () => Date.now() };

export const systemRandom: Random = {
  bytes: (n) => randomBytes(n),
  float: () => Math.random(),
};
