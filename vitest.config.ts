import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // At least two files at once. Vitest's default (one fewer than the cores) ran one file at a time on the 2-core
    // machines the suite is measured on, while much of an end-to-end file's time is waiting (receivers' delays,
    // retries coming due, processes starting): two at once took the suite from ~650 s to ~520 s there.
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
