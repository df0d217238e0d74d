/**
 * Populating bench/scale.ts's stores: the tenants, endpoints and secrets it creates through the store's own
 * methods (built here), and a backlog of pending deliveries written set-based — generate_series/unnest on
 * PostgreSQL, prepared inserts in one transaction on SQLite — instead of a million intake + fan-out passes. The
 * backlog rows are the ones fan-out writes: one event per delivery; the delivery `pending`, attempts 0,
 * next_attempt_at = created_at = updated_at = the fan-out time, no lease; the endpoint's queue row's next_due_at
 * lowered to it. (Fan-out also counts the endpoint's volume per minute on the queue row, the lane promotion
 * signal; only the maintenance role reads it and none runs here, so the bulk load leaves it alone.) bench/scale.ts
 * checks the rows against the store's read methods and a delivery the product's own fan-out made.
 */
import { deepStrictEqual, strictEqual } from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createLocalKeyService } from '../src/adapters/crypto/envelope.ts';
import { secretAad } from '../src/app/secret-cache.ts';
import { ID_PREFIXES, type IdKind, isId, newId, ulid } from '../src/domain/ids.ts';
import type { EndpointRecord, SecretRecord } from '../src/ports/delivery-store.ts';
import type { ApiKeyRecord, Store, TenantRecord } from '../src/ports/store.ts';
import { type Log, tcpLocalPortsOf } from './support.ts';

const HOUR = 3_600_000;

export interface Fixture {
  tenants: TenantRecord[];
  tenantKeys: ApiKeyRecord[];
  endpoints: EndpointRecord[];
  secrets: SecretRecord[];
  /** The key service the secrets are sealed with (checked by opening one). */
  keys: ReturnType<typeof createLocalKeyService>;
}

/**
 * `endpoints` endpoints, `perTenant` to a tenant, each subscribed to an event type of its own (`scale.e<i>`), so
 * an event of that type in that tenant fans out to exactly one delivery; ordering `none`, the default cap of 10.
 */
export function buildFixture(endpoints: number, perTenant: number, now: number): Fixture {
  const keys = createLocalKeyService({ masterKey: randomBytes(32) });
  const fx: Fixture = { tenants: [], tenantKeys: [], endpoints: [], secrets: [], keys };
  for (let i = 0; i < endpoints; i++) {
    if (i % perTenant === 0) {
      const tenant: TenantRecord = {
        id: newId('tenant', now, randomBytes(10)),
        name: `scale tenant ${i / perTenant}`,
        totpSeedSealed: keys.seal(randomBytes(20), `totp:${i}`),
        createdAt: now,
        deletedAt: null,
      };
      fx.tenants.push(tenant);
      fx.tenantKeys.push({
        id: newId('apiKey', now, randomBytes(10)),
        kind: 'tenant',
        tenantId: tenant.id,
        name: null,
        hash: randomBytes(32).toString('hex'),
        prefix: 'hkt_scal',
        createdAt: now,
        revokedAt: null,
      });
    }
    const tenantId = fx.tenants[fx.tenants.length - 1]!.id;
    const ep: EndpointRecord = {
      id: newId('endpoint', now, randomBytes(10)),
      tenantId,
      url: `https://receiver-${i % 997}.example.com/webhooks/${i}`,
      description: null,
      eventTypes: [`scale.e${i}`],
      ordering: 'none',
      maxConcurrency: 10,
      headers: {},
      status: 'enabled',
      disabledReason: null,
      createdAt: now,
      updatedAt: now,
    };
    fx.endpoints.push(ep);
    fx.secrets.push({
      id: newId('secret', now, randomBytes(10)),
      endpointId: ep.id,
      tenantId,
      sealed: keys.seal(
        Buffer.from(`whsec_${randomBytes(32).toString('base64')}`),
        secretAad(tenantId, ep.id),
      ),
      activeFrom: now,
      activeUntil: null,
      createdAt: now,
    });
  }
  return fx;
}

/** Deliveries to add to one endpoint; its event type is `eventTypes[0]`. */
export interface BacklogItem {
  endpoint: EndpointRecord;
  count: number;
}

export interface Populator {
  /**
   * Adds the items' deliveries, each with an event of its own, as fan-out would have created them over
   * [from, to): round k adds the k-th delivery of every item that wants one, so endpoints interleave in time.
   */
  addBacklog(items: BacklogItem[], from: number, to: number, data: string): Promise<number>;
  /** What a production database has between bulk loads and measurements (PostgreSQL: autovacuum). */
  settle(): Promise<void>;
  pendingCount(): Promise<number>;
  /** Processes doing this process's database work elsewhere (PostgreSQL backends). */
  backendPids(): Promise<number[]>;
  close(): Promise<void>;
}

const ZERO = new Uint8Array(10);
/**
 * A well-formed id (`dlv_` + 26 Crockford characters, the time part encoding `at`) whose random part is the
 * decimal serial `n`: unique, time-sortable, and the same in SQL (ulid_time below) as here.
 */
export const serialId = (kind: IdKind, at: number, n: number) =>
  `${ID_PREFIXES[kind]}_${ulid(at, ZERO).slice(0, 10)}${String(n).padStart(16, '0')}`;

/** `{"n":<n>,` + the rest of `data` (a JSON object): every event body differs, like real ones. */
const eventBody = (data: string, n: number) => `{"n":${n},${data.slice(1)}`;

const rounds = (items: BacklogItem[]) => Math.max(0, ...items.map((x) => x.count));
const timeOf = (from: number, to: number, i: number, total: number) =>
  from + Math.floor((i * (to - from)) / Math.max(1, total));

// ---------------------------------------------------------------------------------------------- PostgreSQL

/** What endpointCreate and tenantCreate write: copied as is into the other stores of a run. */
const REGISTRATION_TABLES = ['tenants', 'api_keys', 'endpoints', 'endpoint_queue', 'endpoint_secrets'];

export async function postgresPopulator(
  url: string,
): Promise<Populator & { copyRegistrations(fromSchema: string): Promise<void> }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  // ULID time part in SQL: 10 base-32 digits of the millisecond time, session-local. One expression, so the
  // planner inlines it (a subquery per call made populating a million rows take minutes).
  const digit = (k: number) =>
    `substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((t >> ${5 * k}) & 31)::int + 1, 1)`;
  await c.query(`CREATE FUNCTION pg_temp.ulid_time(t bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
      SELECT ${[9, 8, 7, 6, 5, 4, 3, 2, 1, 0].map(digit).join(' || ')} $$`);
  const probe = 1_764_400_000_123;
  const sqlTime = (await c.query('SELECT pg_temp.ulid_time($1) AS t', [probe])).rows[0].t;
  if (sqlTime !== serialId('event', probe, 0).slice(4, 14)) throw new Error(`ulid_time mismatch: ${sqlTime}`);
  let serial = 0;

  return {
    async addBacklog(items, from, to, data) {
      const total = items.reduce((a, x) => a + x.count, 0);
      let done = 0;
      for (let k = 1; k <= rounds(items); k++) {
        const now = items.filter((x) => x.count >= k).map((x) => x.endpoint);
        // One statement per round: the events (ids and bodies from a serial), their deliveries (ids from the
        // event's seq), and the queue rows' due times, LEAST on the current value as fan-out does.
        await c.query(
          `WITH x AS (
             SELECT u.endpoint_id, u.tenant_id, u.type, $5::bigint + u.ord AS n,
                    $3::bigint + (($6::bigint + u.ord - 1) * ($4::bigint - $3::bigint)) / $7::bigint AS at
               FROM unnest($1::text[], $2::text[], $8::text[]) WITH ORDINALITY AS u(endpoint_id, tenant_id, type, ord)
           ),
           ev AS (
             INSERT INTO events (id, tenant_id, type, resource_id, data, idempotency_key, request_hash, created_at)
             SELECT 'evt_' || pg_temp.ulid_time(x.at) || lpad(x.n::text, 16, '0'), x.tenant_id, x.type, NULL,
                    '{"n":' || x.n || ',' || substr($9::text, 2), NULL, NULL, x.at
               FROM x ORDER BY x.n
             RETURNING seq, id, tenant_id, type, created_at
           ),
           dl AS (
             INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id,
                                     webhook_id, status, attempts, next_attempt_at, replayed_from, created_at,
                                     updated_at)
             SELECT 'dlv_' || pg_temp.ulid_time(ev.created_at) || lpad(ev.seq::text, 16, '0'), ev.tenant_id,
                    x.endpoint_id, ev.id, ev.seq, ev.type, NULL,
                    'msg_' || pg_temp.ulid_time(ev.created_at) || lpad(ev.seq::text, 16, '0'), 'pending', 0,
                    ev.created_at, NULL, ev.created_at, ev.created_at
               FROM ev JOIN x ON x.type = ev.type
           )
           UPDATE endpoint_queue q SET next_due_at = LEAST(COALESCE(q.next_due_at, x.at), x.at)
             FROM x WHERE q.endpoint_id = x.endpoint_id`,
          [
            now.map((e) => e.id),
            now.map((e) => e.tenantId),
            from,
            to,
            serial,
            done,
            total,
            now.map((e) => e.eventTypes[0]),
            data,
          ],
        );
        serial += now.length;
        done += now.length;
      }
      return done;
    },

    async settle() {
      // Autovacuum is off on the benchmark server; a production one vacuums and analyses after a bulk load and
      // while rows churn, so the planner has statistics and dead row versions do not pile up. The checkpoint
      // writes everything back now, so that a measurement does not share the disk with a checkpoint.
      await c.query('VACUUM (ANALYZE) events, deliveries, endpoint_queue, endpoints, attempts');
      await c.query('CHECKPOINT');
    },

    async copyRegistrations(fromSchema) {
      await c.query('BEGIN');
      for (const table of REGISTRATION_TABLES) {
        await c.query(`INSERT INTO ${table} SELECT * FROM "${fromSchema}".${table}`);
      }
      await c.query('COMMIT');
    },

    async pendingCount() {
      return Number(
        (await c.query(`SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`)).rows[0].n,
      );
    },

    async backendPids() {
      const ports = tcpLocalPortsOf(process.pid);
      const rows = (
        await c.query<{ pid: number; port: number | null }>(
          'SELECT pid, client_port AS port FROM pg_stat_activity',
        )
      ).rows;
      return rows.filter((r) => r.port !== null && ports.has(r.port)).map((r) => r.pid);
    },

    close: () => c.end(),
  };
}

// ---------------------------------------------------------------------------------------------- SQLite

/** A consistent copy of a whole SQLite database (tenants, endpoints, … as the store wrote them). */
export function sqliteCopy(from: string, to: string): void {
  const db = new Database(from);
  try {
    db.prepare('VACUUM INTO ?').run(to);
  } finally {
    db.close();
  }
}

export function sqlitePopulator(filename: string): Populator {
  const db = new Database(filename);
  // Bulk load only: a crash loses a benchmark database, nothing else (the store's own connection stays FULL).
  db.pragma('synchronous = OFF');
  let serial = 0;

  const backlog = db.transaction((items: BacklogItem[], from: number, to: number, data: string) => {
    const ev = db.prepare(
      `INSERT INTO events (id, tenant_id, type, resource_id, data, idempotency_key, request_hash, created_at)
       VALUES (?, ?, ?, NULL, ?, NULL, NULL, ?)`,
    );
    const dl = db.prepare(
      `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id,
                               webhook_id, status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, NULL, ?, 'pending', 0, ?, NULL, ?, ?)`,
    );
    const due = db.prepare(
      'UPDATE endpoint_queue SET next_due_at = min(coalesce(next_due_at, @at), @at) WHERE endpoint_id = @id',
    );
    const total = items.reduce((a, x) => a + x.count, 0);
    let done = 0;
    for (let k = 1; k <= rounds(items); k++) {
      for (const x of items) {
        if (x.count < k) continue;
        const at = timeOf(from, to, done++, total);
        const n = ++serial;
        const type = x.endpoint.eventTypes[0]!;
        const eventId = serialId('event', at, n);
        const seq = Number(
          ev.run(eventId, x.endpoint.tenantId, type, eventBody(data, n), at).lastInsertRowid,
        );
        dl.run(
          serialId('delivery', at, seq),
          x.endpoint.tenantId,
          x.endpoint.id,
          eventId,
          seq,
          type,
          serialId('message', at, seq),
          at,
          at,
          at,
        );
        due.run({ at, id: x.endpoint.id });
      }
    }
    return done;
  });

  return {
    addBacklog: async (items, from, to, data) => backlog(items, from, to, data),
    // The product never runs ANALYZE on SQLite; measuring without it is measuring what ships.
    settle: async () => void db.pragma('wal_checkpoint(TRUNCATE)'),
    pendingCount: async () =>
      (db.prepare(`SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`).get() as { n: number }).n,
    backendPids: async () => [],
    close: async () => void db.close(),
  };
}

// ---------------------------------------------------------------------------------------------- checks

/** Cheap unique ids for records written in bulk (randomBytes per id would dominate the refill). */
export function idFactory() {
  const entropy = randomBytes(10);
  let counter = 0;
  return (kind: Parameters<typeof newId>[0], now: number) => {
    entropy.writeUInt32BE(++counter, 6);
    return newId(kind, now, entropy);
  };
}

/**
 * Tenants and endpoints through the store's own methods (tenantCreate, endpointCreate), so every row — the
 * endpoint's queue row with its lane above all — is what the product writes; `parallel` calls at a time.
 */
export async function createFixture(store: Store, fx: Fixture, parallel: number, log: Log): Promise<void> {
  const run = async (n: number, fn: (i: number) => Promise<void>) => {
    let next = 0;
    const lane = async () => {
      for (let i = next++; i < n; i = next++) await fn(i);
    };
    await Promise.all(Array.from({ length: parallel }, lane));
  };
  await run(fx.tenants.length, (i) =>
    store.tenantCreate({ tenant: fx.tenants[i]!, tenantKey: fx.tenantKeys[i]! }),
  );
  await run(fx.endpoints.length, async (i) => {
    await store.endpointCreate({ endpoint: fx.endpoints[i]!, secret: fx.secrets[i]! });
    if (i % 10_000 === 9_999) log(`${i + 1} endpoints created`);
  });
}

/** Endpoints, secrets and tenants as the store reads them back equal what was generated. */
export async function checkFixture(store: Store, fx: Fixture, now: number): Promise<void> {
  for (const i of [0, Math.floor(fx.endpoints.length / 2), fx.endpoints.length - 1]) {
    const ep = fx.endpoints[i]!;
    deepStrictEqual(await store.endpointGet({ id: ep.id, tenantId: ep.tenantId }), ep);
    const secrets = await store.secretListActive({ endpointId: ep.id, now });
    deepStrictEqual(secrets, [fx.secrets[i]]);
    const value = fx.keys.open(secrets[0]!.sealed, secretAad(ep.tenantId, ep.id)).toString('utf8');
    strictEqual(value.startsWith('whsec_'), true);
    const tenant = fx.tenants.find((t) => t.id === ep.tenantId)!;
    deepStrictEqual(await store.tenantGet({ id: tenant.id }), tenant);
    deepStrictEqual((await store.endpointRuntime({ endpointId: ep.id }))?.inflight, 0);
  }
}

/**
 * The populated deliveries of `endpointId` look exactly like `reference`, which the product's own intake and
 * fan-out made: same fields, same constants, the same time invariants, and an event of their own.
 */
export async function checkBacklogShape(
  store: Store,
  endpointId: string,
  referenceId: string,
): Promise<void> {
  const ref = (await store.deliveryGet({ id: referenceId, tenantId: null }))!;
  const page = await store.deliveryList({
    endpointId,
    tenantId: null,
    status: 'pending',
    limit: 50,
    cursor: null,
  });
  const populated = page.data.filter((d) => d.id !== referenceId);
  if (populated.length === 0) throw new Error('no populated delivery to check');
  const constant = (d: typeof ref) => {
    const { id, eventId, webhookId, nextAttemptAt, createdAt, updatedAt, ...rest } = d;
    return rest;
  };
  for (const listed of populated.slice(0, 5)) {
    const d = (await store.deliveryGet({ id: listed.id, tenantId: ref.tenantId }))!;
    deepStrictEqual(Object.keys(d).sort(), Object.keys(ref).sort());
    deepStrictEqual(constant(d), constant(ref));
    strictEqual(isId('delivery', d.id) && isId('message', d.webhookId) && isId('event', d.eventId), true);
    strictEqual(d.nextAttemptAt === d.createdAt && d.createdAt === d.updatedAt, true);
    strictEqual(ref.nextAttemptAt === ref.createdAt && ref.createdAt === ref.updatedAt, true);
    const ev = (await store.eventGet({ id: d.eventId, tenantId: d.tenantId }))!;
    const refEv = (await store.eventGet({ id: ref.eventId, tenantId: ref.tenantId }))!;
    deepStrictEqual({ ...ev, id: '', data: '', createdAt: 0 }, { ...refEv, id: '', data: '', createdAt: 0 });
    JSON.parse(ev.data);
    strictEqual(ev.createdAt, d.createdAt);
  }
}

/** The reference: one delivery made by the product's own intake and fan-out, for `endpoint`, an hour ago. */
export async function referenceDelivery(store: Store, endpoint: Fixture['endpoints'][number], data: string) {
  const at = Date.now() - HOUR - 1;
  const id = idFactory();
  await store.eventInsertBatch({
    events: [
      {
        id: id('event', at),
        tenantId: endpoint.tenantId,
        type: endpoint.eventTypes[0]!,
        resourceId: null,
        data,
        idempotencyKey: null,
        requestHash: null,
        createdAt: at,
      },
    ],
    now: at,
    idempotencyWindowMs: 24 * HOUR,
  });
  const fanned = await store.fanoutRun({
    now: at,
    limit: 10,
    ids: { delivery: () => id('delivery', at), webhookId: () => id('message', at) },
  });
  strictEqual(fanned.deliveries, 1);
  const page = await store.deliveryList({
    endpointId: endpoint.id,
    tenantId: null,
    status: null,
    limit: 1,
    cursor: null,
  });
  return page.data[0]!.id;
}
