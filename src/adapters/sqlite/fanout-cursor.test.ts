import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSqliteStore } from './sqlite-store.ts';

const MIGRATIONS = new URL('./migrations/', import.meta.url);
const ids = { delivery: () => `dlv_${Math.random()}`, webhookId: () => `msg_${Math.random()}` };

/** A database as the migrations before 0010 left it: `events` 1..`events`, the ones from `firstPending` on unfanned. */
function databaseBefore0010(file: string, events: number, firstPending: number | null) {
  const db = new Database(file);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)');
  for (const f of readdirSync(MIGRATIONS).sort()) {
    const version = Number(f.slice(0, 4));
    if (!/^\d{4}_.*\.sql$/.test(f) || version >= 10) continue;
    db.exec(readFileSync(new URL(f, MIGRATIONS), 'utf8'));
    db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)').run(version);
  }
  for (let seq = 1; seq <= events; seq++) {
    db.prepare(
      `INSERT INTO events (id, tenant_id, type, resource_id, data, idempotency_key, request_hash, created_at)
       VALUES (?, 'ten_1', 'a.b', NULL, '{}', NULL, NULL, 1)`,
    ).run(`evt_${seq}`);
    if (firstPending !== null && seq >= firstPending) {
      db.prepare(
        'INSERT INTO fanout_pending (event_seq, event_id, tenant_id, created_at) VALUES (?, ?, ?, 1)',
      ).run(seq, `evt_${seq}`, 'ten_1');
    }
  }
  db.close();
}

describe('fan-out cursor (SQLite migration 0010)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'hookrail-cursor-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    { name: 'events still pending', events: 5, firstPending: 3, pending: 3 },
    { name: 'none pending', events: 4, firstPending: null, pending: 0 },
    { name: 'no events at all', events: 0, firstPending: null, pending: 0 },
  ])('starts where fanout_pending left off: $name', async ({ events, firstPending, pending }) => {
    const file = join(dir, 'hookrail.db');
    databaseBefore0010(file, events, firstPending);
    const store = createSqliteStore({ filename: file });
    try {
      await store.migrate();
      expect(await store.fanoutPendingCount()).toBe(pending);
      // Exactly the pending events are taken (their tenant does not exist, so they make no deliveries), once.
      expect((await store.fanoutRun({ now: 2, limit: 100, ids })).events).toBe(pending);
      expect((await store.fanoutRun({ now: 2, limit: 100, ids })).events).toBe(0);
      // An event accepted after the migration is the next one taken.
      await store.eventInsertBatch({
        events: [
          {
            id: 'evt_new',
            tenantId: 'ten_1',
            type: 'a.b',
            resourceId: null,
            data: '{}',
            idempotencyKey: null,
            requestHash: null,
            createdAt: 3,
          },
        ],
        now: 3,
        idempotencyWindowMs: 1000,
      });
      expect(await store.fanoutPendingCount()).toBe(1);
      expect((await store.fanoutRun({ now: 4, limit: 100, ids })).events).toBe(1);
      expect(await store.fanoutPendingCount()).toBe(0);
    } finally {
      await store.close();
    }
  });
});
