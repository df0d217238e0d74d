import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.ts';
import { createSqliteStore } from './sqlite-store.ts';

describe('WAL checkpoints on their own thread (SQLite)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'hookrail-ckpt-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  // Writes ~2,400 pages (under the writers' backstop of 10,000, over SQLite's default of 1,000).
  const fill = async (store: ReturnType<typeof createSqliteStore>) => {
    const data = JSON.stringify({ pad: 'x'.repeat(3000) });
    for (let batch = 0; batch < 8; batch++) {
      await store.eventInsertBatch({
        events: Array.from({ length: 300 }, (_, i) => ({
          id: `evt_${batch}_${i}`,
          tenantId: 'ten_1',
          type: 'a.b',
          resourceId: null,
          data,
          idempotencyKey: null,
          requestHash: null,
          createdAt: 1,
        })),
        now: 1,
        idempotencyWindowMs: 1000,
      });
    }
  };

  it('copies the WAL into the database file without the writer checkpointing', async () => {
    const file = join(dir, 'hookrail.db');
    const store = createSqliteStore({ filename: file, checkpoints: 'thread' });
    await store.migrate();
    const before = statSync(file).size;
    await fill(store);
    // The writer's own checkpoint would only start past 10,000 pages: growth of the file is the thread's work.
    expect(await waitFor(() => statSync(file).size > before + 4_000_000, 5_000, 'the copy')).toBe(true);
    await store.close();
  });

  it('leaves the WAL alone when another store checkpoints (`elsewhere`)', async () => {
    const file = join(dir, 'hookrail.db');
    const store = createSqliteStore({ filename: file, checkpoints: 'elsewhere' });
    await store.migrate();
    const before = statSync(file).size;
    await fill(store);
    await new Promise((r) => setTimeout(r, 300));
    expect(statSync(file).size).toBe(before);
    expect(statSync(`${file}-wal`).size).toBeGreaterThan(4_000_000);
    await store.close();
  });
});
