/**
 * A wake-up between loops in one process: intake pokes fan-out, fan-out pokes delivery, so a lone process reacts
 * in microseconds instead of at the next poll. To a loop in another thread the poke is passed on through shared
 * memory (`onPoke`, bootstrap/thread-wake.ts); across processes the loops fall back to polling.
 */
/** One loop waiting: woken by a poke or by its timer, whichever is first. */
interface Waiter {
  resolve: () => void;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The timer's callback: a module function rather than a closure per wait (tsx's `keepNames` wraps every named
 * closure in a `defineProperty` call; see src/adapters/http/undici-sender.ts).
 */
function timedOut(waiters: Waiter[], waiter: Waiter): void {
  const i = waiters.indexOf(waiter);
  if (i !== -1) waiters.splice(i, 1);
  waiter.resolve();
}

export class Signal {
  private readonly waiters: Waiter[] = [];

  /** `onPoke`: also tell a loop elsewhere (another thread) at each poke. */
  constructor(private readonly onPoke: (() => void) | null = null) {}

  poke(): void {
    // Most pokes find nobody waiting (one per completed attempt): no empty array for those.
    if (this.waiters.length > 0) {
      for (const w of this.waiters.splice(0)) {
        clearTimeout(w.timer);
        w.resolve();
      }
    }
    this.onPoke?.();
  }

  /** Resolves at the next poke or after `ms`, whichever is first. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const waiter: Waiter = { resolve, timer: undefined };
      waiter.timer = setTimeout(timedOut, ms, this.waiters, waiter);
      this.waiters.push(waiter);
    });
  }
}
