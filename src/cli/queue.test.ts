/**
 * `hookrail queue rebuild`, run in-process with captured output against a SQLite data directory that a store of
 * this test keeps open meanwhile (as a running Hookrail would). What the rebuild computes is the conformance suite's
 * (test/conformance/operations/queue-rebuild.ts); this checks the command: configuration, output, dry run, progress.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, DAY, endpointRecord, ids, secretRecord } from '../../test/conformance/fixtures.ts';
import { NOW } from '../../test/conformance/store-conformance.ts';
import { createSqliteStore } from '../adapters/sqlite/sqlite-store.ts';
import type { Store } from '../ports/store.ts';
import { CliFailure, CliUsageError } from './io.ts';
import { queueCommand } from './queue.ts';

const root = mkdtempSync(join(tmpdir(), 'hookrail-queue-'));
const dataDir = join(root, 'data');
let store: Store;
let endpointIds: string[];

beforeAll(async () => {
  mkdirSync(dataDir);
  store = createSqliteStore({ filename: join(dataDir, 'hookrail.db') });
  await store.migrate();
  const t = await createTenant(store, NOW);
  endpointIds = [];
  for (let i = 0; i < 3; i++) {
    const ep = endpointRecord(t.id);
    await store.endpointCreate({ endpoint: ep, secret: secretRecord(ep) });
    endpointIds.push(ep.id);
  }
  endpointIds.sort();
  const event = {
    tenantId: t.id,
    type: 'a.b',
    resourceId: null,
    data: '{}',
    idempotencyKey: null,
    requestHash: null,
  };
  await store.eventInsertBatch({
    events: [{ ...event, id: 'evt_01', createdAt: NOW }],
    now: NOW,
    idempotencyWindowMs: DAY,
  });
  await store.fanoutRun({ now: NOW, limit: 10, ids });
});
afterAll(async () => {
  await store?.close();
  rmSync(root, { recursive: true, force: true });
});

/** Writes to the database from outside, as a restore or a hand edit would. */
function sql(text: string) {
  const db = new Database(join(dataDir, 'hookrail.db'));
  try {
    db.exec(text);
  } finally {
    db.close();
  }
}

async function queue(args: string[], o: { interactive?: boolean; env?: Record<string, string> } = {}) {
  let out = '';
  let err = '';
  const code = await queueCommand(args, {
    out: (s) => {
      out += s;
    },
    err: (s) => {
      err += s;
    },
    env: o.env ?? {},
    interactive: o.interactive ?? false,
    confirm: async () => false,
    readStdin: async () => Buffer.alloc(0),
  });
  return { code, out, err, json: out.startsWith('{') ? JSON.parse(out) : null };
}

describe('hookrail queue rebuild', () => {
  it('reports correct rows as they are and changes nothing', async () => {
    const r = await queue(['rebuild', '--data-dir', dataDir]);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.json).toEqual({ dry_run: false, endpoints: 3, fixed: 0, changes: [], changes_omitted: 0 });
  });

  it('reports drift on a dry run without writing, then repairs it', async () => {
    const [a, b, c] = endpointIds as [string, string, string];
    sql(`UPDATE endpoint_queue SET inflight = 5 WHERE endpoint_id = '${a}';
         UPDATE endpoint_queue SET next_due_at = NULL WHERE endpoint_id = '${b}';
         DELETE FROM endpoint_queue WHERE endpoint_id = '${c}';`);
    const expected = {
      endpoints: 3,
      fixed: 3,
      changes: [
        { endpoint_id: a, created: false, inflight: [5, 0], next_due_at: [NOW, NOW] },
        { endpoint_id: b, created: false, inflight: [0, 0], next_due_at: [null, NOW] },
        { endpoint_id: c, created: true, inflight: [null, 0], next_due_at: [null, NOW] },
      ],
      changes_omitted: 0,
    };
    const dry = await queue(['rebuild', '--dry-run'], { env: { HOOKRAIL_DATA_DIR: dataDir } });
    expect(dry.json).toEqual({ dry_run: true, ...expected });
    expect((await store.endpointRuntime({ endpointId: a }))?.inflight).toBe(5);
    expect(await store.endpointRuntime({ endpointId: c })).toBeNull();

    const fixed = await queue(['rebuild', '--data-dir', dataDir]);
    expect(fixed.json).toEqual({ dry_run: false, ...expected });
    // The store that stayed open sees the repaired rows, and the delivery plane works on them.
    expect((await store.endpointRuntime({ endpointId: a }))?.inflight).toBe(0);
    expect(await store.endpointRuntime({ endpointId: c })).not.toBeNull();
    const leased = await store.deliveryLease({
      owner: 'w1',
      now: NOW,
      limit: 10,
      perEndpoint: 10,
      leaseMs: 30_000,
    });
    expect(leased.map((l) => l.delivery.endpointId).sort()).toEqual(endpointIds);
    expect((await queue(['rebuild', '--data-dir', dataDir])).json).toMatchObject({ endpoints: 3, fixed: 0 });
  });

  it('lists the first 100 changes and counts the rest', async () => {
    const t = await createTenant(store, NOW);
    for (let i = 0; i < 100; i++) {
      const ep = endpointRecord(t.id);
      await store.endpointCreate({ endpoint: ep, secret: secretRecord(ep) });
    }
    sql('UPDATE endpoint_queue SET inflight = inflight + 1');
    const r = await queue(['rebuild', '--data-dir', dataDir]);
    expect(r.json).toMatchObject({ endpoints: 103, fixed: 103, changes_omitted: 3 });
    expect(r.json.changes).toHaveLength(100);
  });

  it('draws its progress on standard error at a terminal', async () => {
    const r = await queue(['rebuild', '--data-dir', dataDir], { interactive: true });
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/^\rrebuilding: \d+\/103 endpoints/);
    expect(r.err.endsWith('\rrebuilding: 103/103 endpoints\n')).toBe(true);
  });

  it('refuses a data directory without a database, creating nothing there', async () => {
    const empty = join(root, 'nothing-here');
    await expect(queue(['rebuild', '--data-dir', empty])).rejects.toBeInstanceOf(CliFailure);
    expect(existsSync(empty)).toBe(false);
  });

  it.each([
    ['no queue command', []],
    ['an unknown queue command', ['drain']],
    ['an unknown flag', ['rebuild', '--force']],
    ['a database URL that is not PostgreSQL', ['rebuild', '--database-url', 'mysql://x']],
  ])('refuses %s as a usage error', async (_name, args) => {
    await expect(queue(args)).rejects.toBeInstanceOf(CliUsageError);
  });

  it('prints its help', async () => {
    for (const args of [['--help'], ['rebuild', '--help']]) {
      const r = await queue(args);
      expect(r.code).toBe(0);
      expect(r.out).toMatch(/hookrail queue rebuild \[--dry-run\]/);
    }
  });
});
