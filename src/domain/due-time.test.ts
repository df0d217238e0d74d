import { describe, expect, it } from 'vitest';
import { completionMovesDueTime } from './due-time.ts';

describe('completionMovesDueTime', () => {
  it.each<['pending' | 'delivered' | 'dead', boolean, boolean]>([
    ['pending', true, true], // a retry goes back to the queue
    ['delivered', true, false], // a leased delivery was never in the unleased set
    ['dead', true, false],
    ['pending', false, true], // a skip rescheduled
    ['dead', false, true], // a skip dead-lettered leaves the set
    ['delivered', false, true],
  ])('next %s, leased %s → %s', (status, leased, moves) => {
    expect(completionMovesDueTime(status, leased)).toBe(moves);
  });
});
