/**
 * A wake-up between loops in one process: intake pokes fan-out, fan-out pokes delivery, so a lone process reacts
 * in microseconds instead of at the next poll. To a loop in another thread the poke is passed on as a message
 * (`onPoke`); across processes the loops fall back to polling.
 */
export class Signal {
  private waiters: Array<() => void> = [];

  /** `onPoke`: also tell a loop elsewhere (another thread) at each poke. */
  constructor(private readonly onPoke: (() => void) | null = null) {}

  poke(): void {
    for (const w of this.waiters.splice(0)) w();
    this.onPoke?.();
  }

  /** Resolves at the next poke or after `ms`, whichever is first. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        const i = self.waiters.indexOf(done);
        if (i !== -1) self.waiters.splice(i, 1);
        resolve();
      }
      this.waiters.push(done);
    });
  }
}
