type Falsy = null | undefined | false | 0 | '';

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (real time; for loops running in the background). */
export async function waitFor<T>(
  check: () => T | Falsy | Promise<T | Falsy>,
  timeoutMs = 10_000,
  label = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
