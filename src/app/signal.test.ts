import { afterEach, describe, expect, it, vi } from 'vitest';
import { Signal } from './signal.ts';

describe('Signal', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const settled = (p: Promise<void>) => {
    const state = { done: false };
    void p.then(() => {
      state.done = true;
    });
    return state;
  };

  it('a poke wakes every waiter at once and cancels their timers', async () => {
    vi.useFakeTimers();
    const signal = new Signal();
    const a = settled(signal.wait(1_000));
    const b = settled(signal.wait(5_000));
    expect(vi.getTimerCount()).toBe(2);
    signal.poke();
    await Promise.resolve();
    expect(a.done && b.done).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('without a poke, each waiter wakes at its own timeout and leaves the others waiting', async () => {
    vi.useFakeTimers();
    const signal = new Signal();
    const short = settled(signal.wait(100));
    const long = settled(signal.wait(1_000));
    await vi.advanceTimersByTimeAsync(100);
    expect(short.done).toBe(true);
    expect(long.done).toBe(false);
    // A loop waits thousands of times a second: a waiter that timed out must not stay in the list.
    expect((signal as unknown as { waiters: unknown[] }).waiters).toHaveLength(1);
    // The timed-out waiter is gone: the next poke wakes only the one still waiting, and no timer is left behind.
    signal.poke();
    await Promise.resolve();
    expect(long.done).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a poke with nobody waiting is not remembered, and is passed on to the other thread each time', async () => {
    vi.useFakeTimers();
    const onPoke = vi.fn();
    const signal = new Signal(onPoke);
    signal.poke();
    const late = settled(signal.wait(50));
    await Promise.resolve();
    expect(late.done).toBe(false);
    signal.poke();
    await Promise.resolve();
    expect(late.done).toBe(true);
    expect(onPoke).toHaveBeenCalledTimes(2);
  });
});
