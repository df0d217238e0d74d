import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createWriteLock } from '../adapters/sqlite/write-lock.ts';
import { loadConfig } from '../config/config.ts';
import type { Metrics } from '../ports/metrics.ts';
import { startPipelineThread } from './pipeline-thread.ts';

// Attempts and lane moves the thread forwards (the API thread's metrics in production).
const recorded: Metrics = {
  eventAccepted() {},
  attemptRecorded() {},
  laneMoved() {},
  render: async () => ({ contentType: 'text/plain', body: '' }),
};

describe('pipeline thread', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'hookrail-pipeline-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a thread that cannot start rejects the start and reports the failure once', {
    timeout: 20_000,
  }, async () => {
    const notADirectory = join(dir, 'file');
    writeFileSync(notADirectory, 'x');
    const config = {
      ...loadConfig({ HOOKRAIL_MASTER_KEY: Buffer.alloc(32, 7).toString('base64') }),
      dataDir: join(notADirectory, 'data'), // the thread's store cannot create it
      roles: ['delivery' as const, 'maintenance' as const],
    };
    const fatal: unknown[] = [];
    await expect(
      startPipelineThread({
        config,
        lock: createWriteLock(),
        metrics: recorded,
        logger: null,
        onFatal: (err) => fatal.push(err),
      }),
    ).rejects.toThrow(/ENOTDIR/);
    // The thread's 'exit' follows its 'error': give it time to arrive, then still one report.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(fatal).toHaveLength(1);
  });
});
