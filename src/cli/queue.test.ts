/**
 * `hookrail queue rebuild`, run in-process with captured output against a SQLite data directory that a store of
 * this test keeps open meanwhile (as a running Hookrail would). What the rebuild computes is the conformance suite's
 * (test/conformance/operations/queue-rebuild.ts); this checks the command: configuration, output, dry run, progress.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, DAY, endpointRecord, ids, secretRecord } from '../../test/conformance/fixtures.ts';
import { attemptFor } from '../../test/conformance/operations/harness.ts';
import { NOW } from '../../test/conformance/store-conformance.ts';
import { createSqliteStore } from '../adapters/sqlite/sqlite-store.ts';
import { newId } from '../domain/ids.ts';
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
function sql(text: string, dir = dataDir) {
  const db = new Database(join(dir, 'hookrail.db'));
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

describe('hookrail queue rebuild --deliveries', () => {
  // The command runs on the system clock, and rebuilds only within the attempt log's retention: a history of the
  // last hour.
  const MINUTE = 60_000;
  const T = Date.now() - 60 * MINUTE;
  const dir = join(root, 'deliveries');
  let s: Store;
  let a: string;
  let b: string;
  let eventId: string;

  beforeAll(async () => {
    mkdirSync(dir);
    s = createSqliteStore({ filename: join(dir, 'hookrail.db') });
    await s.migrate();
    // As if upgraded long ago: attempts have named their event since before the attempt log's retention.
    sql(`UPDATE schema_migrations SET applied_at = ${T - 100 * DAY} WHERE version = 18`, dir);
    const t = await createTenant(s, T);
    const eps = [endpointRecord(t.id, { createdAt: T }), endpointRecord(t.id, { createdAt: T })];
    for (const ep of eps) await s.endpointCreate({ endpoint: ep, secret: secretRecord(ep) });
    [a, b] = eps.map((ep) => ep.id) as [string, string];
    eventId = newId('event', T + MINUTE, randomBytes(10));
    await s.eventInsertBatch({
      events: [
        {
          id: eventId,
          tenantId: t.id,
          type: 'a.b',
          resourceId: null,
          data: '{}',
          idempotencyKey: null,
          requestHash: null,
          createdAt: T + MINUTE,
        },
      ],
      now: T + MINUTE,
      idempotencyWindowMs: DAY,
    });
    await s.fanoutRun({ now: T + MINUTE, limit: 10, ids });
    // a's delivery is delivered; b's lease expires before any attempt. Then both rows are lost.
    const leased = await s.deliveryLease({
      owner: 'w1',
      now: T + 2 * MINUTE,
      limit: 10,
      perEndpoint: 10,
      leaseMs: 30_000,
    });
    expect(leased).toHaveLength(2);
    const la = leased.find((l) => l.endpoint.id === a)!;
    await s.deliveryComplete({
      completions: [
        { attempt: attemptFor(la, T + 2 * MINUTE), leaseOwner: 'w1', next: { status: 'delivered' } },
      ],
      now: T + 2 * MINUTE + 200,
    });
    expect(await s.deliveryExpireLeases({ now: T + 3 * MINUTE })).toBe(1);
    sql('DELETE FROM deliveries', dir);
  });
  afterAll(async () => {
    await s?.close();
  });

  const run = (args: string[], o: { interactive?: boolean } = {}) =>
    queue(['rebuild', '--deliveries', '--data-dir', dir, ...args], o);
  const rebuilt = () => ({
    events: 1,
    recreated: 1,
    created: 1,
    endpoints: [
      { endpoint_id: a, recreated: { delivered: 1 }, created: 0 },
      { endpoint_id: b, recreated: {}, created: 1 },
    ].sort((x, y) => (x.endpoint_id < y.endpoint_id ? -1 : 1)),
    endpoints_omitted: 0,
  });

  it('reports on a dry run what it would rebuild, writing nothing', async () => {
    const r = await run(['--dry-run']);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.json).toMatchObject({ dry_run: true, deliveries: rebuilt(), endpoints: 2 });
    expect(Date.parse(r.json.deliveries.since)).toBeLessThan(T - 80 * DAY);
    expect(
      (await s.deliveryList({ endpointId: a, tenantId: null, status: null, limit: 10, cursor: null })).data,
    ).toEqual([]);
  });

  it('rebuilds the lost rows, then the queue state agrees; the delivered one is not leased again', async () => {
    const r = await run([]);
    expect(r.json).toEqual({
      dry_run: false,
      deliveries: { since: expect.any(String), ...rebuilt() },
      endpoints: 2,
      fixed: 0,
      changes: [],
      changes_omitted: 0,
    });
    const [da] = (
      await s.deliveryList({ endpointId: a, tenantId: null, status: null, limit: 10, cursor: null })
    ).data;
    expect(da).toMatchObject({ eventId, status: 'delivered', attempts: 1 });
    const leased = await s.deliveryLease({
      owner: 'w2',
      now: Date.now(),
      limit: 10,
      perEndpoint: 10,
      leaseMs: 30_000,
    });
    expect(leased.map((l) => [l.endpoint.id, l.delivery.eventId])).toEqual([[b, eventId]]);
    // Nothing is left to rebuild.
    expect((await run([])).json.deliveries).toMatchObject({
      events: 1,
      recreated: 0,
      created: 0,
      endpoints: [],
    });
  });

  it('looks only at events accepted since --since, and never before the attempt log reaches back', async () => {
    const r = await run(['--since', new Date(T + 2 * MINUTE).toISOString(), '--dry-run']);
    expect(r.json.deliveries).toMatchObject({ since: new Date(T + 2 * MINUTE).toISOString(), events: 0 });
    const old = await run(['--since', '2000-01-01T00:00:00Z', '--dry-run']);
    expect(old.err).toMatch(
      /^warning: --since is before the attempt log's retention \(90 days\) or before attempts named their event/,
    );
    expect(Date.parse(old.json.deliveries.since)).toBeGreaterThan(Date.parse('2000-01-01T00:00:00Z'));
    expect(old.json.deliveries.events).toBe(1);
  });

  it('never looks at events accepted before attempts named their event (the upgrade)', async () => {
    const upgraded = T + 30 * MINUTE;
    sql(`UPDATE schema_migrations SET applied_at = ${upgraded} WHERE version = 18`, dir);
    try {
      const r = await run(['--dry-run']);
      expect(r.json.deliveries).toMatchObject({
        since: new Date(upgraded).toISOString(),
        events: 0,
        created: 0,
      });
      const early = await run(['--since', new Date(T).toISOString(), '--dry-run']);
      expect(early.err).toMatch(/^warning: --since is before/);
      expect(early.json.deliveries).toMatchObject({ since: new Date(upgraded).toISOString(), events: 0 });
    } finally {
      sql(`UPDATE schema_migrations SET applied_at = ${T - 100 * DAY} WHERE version = 18`, dir);
    }
  });

  it('draws both parts of its progress at a terminal', async () => {
    const r = await run(['--dry-run'], { interactive: true });
    expect(r.err).toMatch(
      /^\rreconstructing deliveries: 1 events(\rreconstructing deliveries: 1 events)?\n\rrebuilding: /,
    );
    expect(r.err.endsWith('\rrebuilding: 2/2 endpoints\n')).toBe(true);
  });

  it.each([
    ['--since without --deliveries', ['rebuild', '--since', '2026-01-01T00:00:00Z']],
    ['a --since that is not a time', ['rebuild', '--deliveries', '--since', 'yesterday']],
    ['a --since without a zone', ['rebuild', '--deliveries', '--since', '2026-12-01T00:00']],
    ['a --since in the future', ['rebuild', '--deliveries', '--since', '2999-01-01T00:00:00Z']],
  ])('refuses %s as a usage error', async (_name, args) => {
    await expect(queue([...args, '--data-dir', dir])).rejects.toBeInstanceOf(CliUsageError);
  });
});
