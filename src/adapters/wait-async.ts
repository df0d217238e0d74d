/**
 * `Atomics.waitAsync` (ES2024), typed: in Node since 16, but TypeScript's ES2022 library does not declare it. Used by
 * the SQLite write lock and the pipeline thread's wake-up, which wait for another thread without blocking their own.
 */
export const waitAsync = (
  Atomics as unknown as {
    waitAsync(
      cell: Int32Array,
      index: number,
      value: number,
      timeoutMs: number,
    ): { async: false; value: string } | { async: true; value: Promise<string> };
  }
).waitAsync;
