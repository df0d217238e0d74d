/**
 * PostgreSQL-specific behaviour that the adapter-agnostic conformance suite cannot express: several processes
 * (simulated by several pools) migrating, inserting, fanning out and leasing at once, server settings and
 * housekeeping. The availability contract is in postgres-availability.test.ts.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { postgresUrl } from '../../../test/support/postgres.ts';
import { event, NOW, postgresStores, WINDOW } from '../../../test/support/postgres-stores.ts';
import { newId } from '../../domain/ids.ts';
import type { Store } from '../../ports/store.ts';
import { lockTenantGatesShared } from './delivery-store.ts';
import { loadMigrations } from './migrate.ts';
import { createPostgresStore, withServerOptions } from './postgres-store.ts';

const { open, schema } = postgresStores();

describe('migrations', () => {
  it('are idempotent and safe when several processes migrate one fresh schema at once', async () => {
    const name = schema();
    const three = [open({ schema: name }), open({ schema: name }), open({ schema: name })];
    await Promise.all(three.map((s) => s.migrate()));
    await Promise.all(three.map((s) => s.migrate()));
    const client = new pg.Client({ connectionString: postgresUrl() });
    await client.connect();
    try {
      const res = await client.query(
        `SELECT version, name FROM "${name}".schema_migrations ORDER BY version`,
      );
      const files = await loadMigrations();
      expect(res.rows).toEqual(files.map((m) => ({ version: m.version, name: m.name })));
      const tables = await client.query(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
        [name],
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual([
        'api_keys',
        'attempts',
        'audit_events',
        'deliveries',
        'endpoint_queue',
        'endpoint_secrets',
        'endpoints',
        'events',
        'fanout_pending',
        'idempotency_keys',
        'notifications',
        'operator_step_up',
        'schema_migrations',
        'tenants',
      ]);
    } finally {
      await client.end();
    }
    await three[0]!.ping();
  });

  it('rejects a schema name that is not a plain identifier', () => {
    expect(() => createPostgresStore({ connectionString: postgresUrl(), schema: 'x; DROP TABLE y' })).toThrow(
      /invalid schema name/,
    );
  });
});

describe('server settings', () => {
  const settingsOf = async (url: string) => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const r = await c.query<{ plan: string; path: string }>(
        `SELECT current_setting('plan_cache_mode') AS plan, current_setting('search_path') AS path`,
      );
      return r.rows[0];
    } finally {
      await c.end();
    }
  };

  it("keep the URL's own options and add Hookrail's (a URL's options replace pg's options setting)", async () => {
    const name = schema();
    const u = new URL(postgresUrl());
    u.searchParams.set('options', `-c search_path=${name} -c statement_timeout=12345`);
    const url = withServerOptions(u.toString(), null);
    expect(await settingsOf(url)).toEqual({ plan: 'force_custom_plan', path: name });
    // The schema option comes last, so it wins over a search_path in the URL.
    expect((await settingsOf(withServerOptions(u.toString(), 'other_schema')))?.path).toBe('other_schema');
    expect(await settingsOf(withServerOptions(postgresUrl(), null))).toMatchObject({
      plan: 'force_custom_plan',
    });
  });

  it('leave a connection string that is not a URL as it is', () => {
    expect(withServerOptions('/var/run/postgresql test', null)).toBe('/var/run/postgresql test');
  });
});

describe('several processes on one schema', () => {
  let name: string;
  beforeAll(async () => {
    name = schema();
    const s = createPostgresStore({ connectionString: postgresUrl(), schema: name });
    await s.migrate();
    await s.close();
  });

  it('one idempotency key across pools creates exactly one event', async () => {
    const pools = [open({ schema: name }), open({ schema: name }), open({ schema: name })];
    const tenantId = newId('tenant', NOW, randomBytes(10));
    const runs = pools.flatMap((s) =>
      Array.from({ length: 5 }, (_, i) =>
        s.eventInsertBatch({
          events: [event(tenantId, 'same'), event(tenantId, null, i)],
          now: NOW,
          idempotencyWindowMs: WINDOW,
        }),
      ),
    );
    const outs = (await Promise.all(runs)).map((o) => o[0]!);
    expect(outs.filter((o) => o.kind === 'created')).toHaveLength(1);
    expect(new Set(outs.map((o) => o.event.id)).size).toBe(1);
    const page = await pools[0]!.eventList({ tenantId, limit: 100, cursor: null });
    expect(page.data.filter((e) => e.idempotencyKey === 'same')).toHaveLength(1);
    expect(page.data).toHaveLength(16);
  });

  it('returns BIGINT columns as numbers without changing pg globally', async () => {
    const s = open({ schema: name });
    const tenantId = newId('tenant', NOW, randomBytes(10));
    const [out] = await s.eventInsertBatch({
      events: [event(tenantId, null)],
      now: NOW,
      idempotencyWindowMs: WINDOW,
    });
    const got = await s.eventGet({ id: out!.event.id, tenantId });
    expect(got?.createdAt).toBe(NOW);
    expect(typeof (await s.fanoutPendingCount())).toBe('number');
    expect(pg.types.getTypeParser(20, 'text')('5')).toBe('5');
  });
});

describe('delivery plane across processes', () => {
  const at = NOW + 1_000;
  const ids = {
    delivery: () => newId('delivery', at, randomBytes(10)),
    webhookId: () => newId('message', at, randomBytes(10)),
  };

  async function setup(
    s: Store,
    endpoints: number,
    maxConcurrency: number,
    orderings: Array<'none' | 'endpoint' | 'resource'> = [],
  ) {
    const tenantId = newId('tenant', NOW, randomBytes(10));
    await s.tenantCreate({
      tenant: { id: tenantId, name: 't', totpSeedSealed: 'x', createdAt: NOW, deletedAt: null },
      tenantKey: {
        id: newId('apiKey', NOW, randomBytes(10)),
        kind: 'tenant',
        tenantId,
        name: null,
        hash: randomBytes(32).toString('hex'),
        prefix: 'hkt_x',
        createdAt: NOW,
        revokedAt: null,
      },
    });
    const eps: string[] = [];
    for (let i = 0; i < endpoints; i++) {
      const id = newId('endpoint', NOW, randomBytes(10));
      eps.push(id);
      await s.endpointCreate({
        endpoint: {
          id,
          tenantId,
          url: 'https://example.com/',
          description: null,
          eventTypes: ['*'],
          ordering: orderings[i] ?? 'none',
          maxConcurrency,
          headers: {},
          status: 'enabled',
          disabledReason: null,
          createdAt: NOW,
          updatedAt: NOW,
        },
        secret: {
          id: newId('secret', NOW, randomBytes(10)),
          endpointId: id,
          tenantId,
          sealed: 'x',
          activeFrom: NOW,
          activeUntil: null,
          createdAt: NOW,
        },
      });
    }
    return { tenantId, eps };
  }

  it('fan-out and leasing from several pools: exactly once, within the global cap', async () => {
    const name = schema();
    const pools = [open({ schema: name }), open({ schema: name }), open({ schema: name })];
    await pools[0]!.migrate();
    const cap = 2;
    const { tenantId, eps } = await setup(pools[0]!, 4, cap);
    await pools[0]!.eventInsertBatch({
      events: Array.from({ length: 30 }, (_, i) => event(tenantId, null, i)),
      now: NOW,
      idempotencyWindowMs: WINDOW,
    });
    const fanned = await Promise.all(
      pools.map(async (s) => {
        let n = 0;
        for (let r = await s.fanoutRun({ now: at, limit: 4, ids }); r.events > 0; ) {
          n += r.deliveries;
          r = await s.fanoutRun({ now: at, limit: 4, ids });
        }
        return n;
      }),
    );
    expect(fanned.reduce((a, b) => a + b, 0)).toBe(120);

    const leased = new Set<string>();
    let now = at;
    for (let round = 0; round < 200 && leased.size < 120; round++) {
      now += 1;
      const outs = await Promise.all(
        pools.flatMap((s, p) =>
          [0, 1].map((w) =>
            s.deliveryLease({ owner: `p${p}w${w}`, now, limit: 5, perEndpoint: 2, leaseMs: 60_000 }),
          ),
        ),
      );
      const perEndpoint = new Map<string, number>();
      for (const l of outs.flat()) {
        expect(leased.has(l.delivery.id)).toBe(false);
        leased.add(l.delivery.id);
        perEndpoint.set(l.endpoint.id, (perEndpoint.get(l.endpoint.id) ?? 0) + 1);
      }
      for (const n of perEndpoint.values()) expect(n).toBeLessThanOrEqual(cap);
      await Promise.all(
        outs.map((out, i) =>
          pools[Math.floor(i / 2)]!.deliveryComplete({
            now: now + 1,
            completions: out.map((l) => ({
              leaseOwner: `p${Math.floor(i / 2)}w${i % 2}`,
              next: { status: 'delivered' as const },
              attempt: {
                id: newId('attempt', now, randomBytes(10)),
                deliveryId: l.delivery.id,
                endpointId: l.endpoint.id,
                tenantId,
                eventId: l.delivery.eventId,
                attemptNo: 1,
                url: l.endpoint.url,
                dueAt: at,
                startedAt: now,
                finishedAt: now,
                outcome: 'delivered' as const,
                statusCode: 200,
                errorClass: null,
                errorMessage: null,
                request: { hops: [] },
                responseHeaders: null,
                responseBody: null,
                queueMs: 0,
                platformMs: 0,
                consumerMs: 0,
              },
            })),
          }),
        ),
      );
    }
    expect(leased.size).toBe(120);
    for (const ep of eps) {
      const page = await pools[1]!.deliveryList({
        endpointId: ep,
        tenantId,
        status: 'delivered',
        limit: 100,
        cursor: null,
      });
      expect(page.data).toHaveLength(30);
      expect(new Set(page.data.map((d) => d.eventId)).size).toBe(30);
    }
    const client = new pg.Client({ connectionString: postgresUrl() });
    await client.connect();
    try {
      const q = await client.query(`SELECT inflight, next_due_at FROM "${name}".endpoint_queue`);
      expect(q.rows).toEqual(eps.map(() => ({ inflight: 0, next_due_at: null })));
    } finally {
      await client.end();
    }
  });

  it('an ordered head is not leased while an earlier event is still being fanned out by another process', async () => {
    // Two fan-out processes claim consecutive events; the later one's transaction commits first. Its deliveries
    // must not become the head of an `endpoint` or `resource` ordered endpoint: the earlier event's are coming.
    const name = schema();
    const s = open({ schema: name });
    await s.migrate();
    const { tenantId, eps } = await setup(s, 3, 5, ['endpoint', 'resource', 'none']);
    const evs = [event(tenantId, null, 0), event(tenantId, null, 1)].map((e) => ({ ...e, resourceId: 'r1' }));
    await s.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
    const held = new pg.Client({ connectionString: postgresUrl(), options: `-c search_path=${name}` });
    await held.connect();
    const lease = () =>
      s.deliveryLease({ owner: 'w', now: at + 1, limit: 10, perEndpoint: 5, leaseMs: 60_000 });
    try {
      await held.query('BEGIN');
      // The other fan-out: it has claimed the first event and not committed.
      await held.query('SELECT event_seq FROM fanout_pending ORDER BY event_seq LIMIT 1 FOR UPDATE');
      expect((await s.fanoutRun({ now: at, limit: 10, ids })).events).toBe(1);
      const early = await lease();
      // Only the unordered endpoint may take the second event now.
      expect(early.map((l) => [l.endpoint.id, l.event.id])).toEqual([[eps[2], evs[1]!.id]]);
      await held.query('ROLLBACK');
      expect((await s.fanoutRun({ now: at, limit: 10, ids })).events).toBe(1);
      const heads = await lease();
      expect(heads.map((l) => [l.endpoint.id, l.event.id]).sort()).toEqual(
        [
          [eps[0], evs[0]!.id],
          [eps[1], evs[0]!.id],
          [eps[2], evs[0]!.id],
        ].sort(),
      );
    } finally {
      await held.end();
    }
  });

  it('endpoint changes are not starved by overlapping fan-outs (fair tenant gate)', async () => {
    // A shared lock that each new fan-out could take while a PATCH waits would let a stream of overlapping
    // fan-outs hold it off forever. Here a "fan-out in progress" holds what fanoutRun holds (the tenant gate,
    // shared); a disable arrives and waits; a second fan-out arrives after it and must now queue behind it.
    const name = schema();
    const pools = [open({ schema: name }), open({ schema: name }), open({ schema: name })];
    await pools[0]!.migrate();
    const { tenantId, eps } = await setup(pools[0]!, 1, 5);
    await pools[0]!.eventInsertBatch({
      events: [event(tenantId, null)],
      now: NOW,
      idempotencyWindowMs: WINDOW,
    });
    const held = new pg.Client({ connectionString: postgresUrl(), options: `-c search_path=${name}` });
    await held.connect();
    // Watches the lock queue (from outside every transaction of the test): how many requests for this tenant's
    // gate wait. A bigint advisory key shows in pg_locks as classid (high 32 bits) and objid (low 32 bits).
    const watch = new pg.Client({ connectionString: postgresUrl() });
    await watch.connect();
    const waitingOnGate = async () =>
      Number(
        (
          await watch.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_locks
              WHERE locktype = 'advisory' AND NOT granted
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('hookrail.tenant:' || $1::text, 0)`,
            [tenantId],
          )
        ).rows[0]!.n,
      );
    const untilWaiting = (n: number) =>
      vi.waitFor(
        async () => {
          expect(await waitingOnGate()).toBeGreaterThanOrEqual(n);
        },
        { timeout: 10_000, interval: 10 },
      );
    const order: string[] = [];
    try {
      await held.query('BEGIN');
      await lockTenantGatesShared(held, [tenantId]);
      const disable = pools[1]!
        .endpointSetStatus({ id: eps[0]!, tenantId, status: 'disabled', reason: 'x', now: at })
        .then(() => order.push('disable'));
      await untilWaiting(1); // the disable waits for the gate
      const fanout = pools[2]!.fanoutRun({ now: at, limit: 10, ids }).then(() => order.push('fanout'));
      // The fan-out waits too, queued behind the disable: a fan-out let in beside the held shared lock never waits
      // here (and would finish first).
      await untilWaiting(2);
      expect(order).toEqual([]);
      await held.query('COMMIT');
      await Promise.all([disable, fanout]);
      expect(order).toEqual(['disable', 'fanout']);
    } finally {
      await held.end();
      await watch.end();
    }
  });
});

describe('housekeeping', () => {
  it('vacuums the hot queue tables of its own schema; two processes at once are fine', async () => {
    const name = schema();
    const a = open({ schema: name });
    const b = open({ schema: name });
    await a.migrate();
    const vacuums = async () => {
      const c = new pg.Client({ connectionString: postgresUrl() });
      await c.connect();
      try {
        const r = await c.query<{ relname: string; n: string }>(
          `SELECT relname, vacuum_count AS n FROM pg_stat_user_tables
            WHERE schemaname = $1 AND relname IN ('fanout_pending', 'endpoint_queue') ORDER BY relname`,
          [name],
        );
        return r.rows.map((x) => [x.relname, Number(x.n)]);
      } finally {
        await c.end();
      }
    };
    expect(await vacuums()).toEqual([
      ['endpoint_queue', 0],
      ['fanout_pending', 0],
    ]);
    await Promise.all([a.housekeeping(), b.housekeeping()]);
    await vi.waitFor(
      async () => {
        for (const [, n] of await vacuums()) expect(n).toBeGreaterThanOrEqual(1);
      },
      { timeout: 5_000, interval: 100 },
    );
  });
});
