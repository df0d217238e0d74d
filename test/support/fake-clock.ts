import type { Clock } from '../../src/ports/clock.ts';

/** A clock the test moves by hand. Starts at 2026-01-01T00:00:00Z unless told otherwise. */
export class FakeClock implements Clock {
  constructor(private ms = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
}
