/**
 * Helpers for end-to-end tests of the delivery plane across real Hookrail child processes: worker-only processes
 * (which print `running` instead of `listening on`), tenant/endpoint setup, a paced event producer that survives an
 * intake restart, paginated reads of an endpoint's deliveries, and a look at the queue's lease bookkeeping straight
 * in the store (SQLite file or PostgreSQL schema), which the API does not expose.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach } from 'vitest';
import { UNFANNED_COUNT_SQL } from '../../src/adapters/sqlite/fanout.ts';
import { type Cleanups, childEnv, createChildSchema, HookrailProcess, tempDir } from './hookrail-process.ts';
import { errorCode, http, isConnectionError, sleep } from './intake-load.ts';
import { postgresUrl } from './postgres.ts';

export interface WorkerProcess extends HookrailProcess {
  /** `http://…` when the process serves intake or control, null for a worker-only process. */
  url: string | null;
}

let tracked: HookrailProcess[] = [];
let counter = 0;

/**
 * Prints the output of the processes started through `startHookrailProcess` when a test fails (they are killed by
 * `useHookrailProcesses`, which must be registered too: they are in its registry of live children). Register after
 * `useHookrailProcesses()` so this runs first (vitest runs after-hooks in reverse order).
 */
export function printWorkerOutputOnFailure(): void {
  afterEach((ctx) => {
    const mine = tracked;
    tracked = [];
    if (ctx.task.result?.state === 'fail') {
      for (const p of mine) process.stderr.write(`${p.output()}\n`);
    }
  });
}

/**
 * `hookrail start` with any roles, ready once it prints its start line (`listening on …` or `running`). Unlike
 * `spawnHookrail`, this also works for processes that serve no HTTP (fanout, delivery, maintenance only).
 */
export async function startHookrailProcess(opts: {
  env: Record<string, string | undefined>;
  /** Extra flags after `start` (e.g. `--lanes shared`). */
  args?: string[];
  name?: string;
  readyTimeoutMs?: number;
}): Promise<WorkerProcess> {
  const proc = new HookrailProcess(
    ['start', ...(opts.args ?? [])],
    childEnv(opts.env),
    opts.name ?? `worker#${++counter}`,
  );
  tracked.push(proc);
  const url = await proc.waitFor(
    () => {
      const m = /hookrail \S+ (?:listening on (http:\/\/\S+)|running) /.exec(proc.stdout);
      return m ? (m[1] ?? null) : undefined;
    },
    opts.readyTimeoutMs ?? 20_000,
    'start line',
  );
  return Object.assign(proc, { url });
}

/** The pid that a delivery worker's lease owner (`host:pid:random`) names. */
export function ownerPid(owner: string): number {
  return Number(owner.split(':').at(-2));
}

export interface Tenant {
  tenantId: string;
  tenantKey: string;
  producerKey: string;
}

export async function createTenant(base: string, adminToken: string): Promise<Tenant> {
  const tenant = await http(base, { path: '/v1/tenants', token: adminToken, body: { name: 'delivery e2e' } });
  if (tenant.status !== 201)
    throw new Error(`POST /v1/tenants: ${tenant.status} ${JSON.stringify(tenant.body)}`);
  const key = await http(base, { path: '/v1/producer-keys', token: adminToken, body: { name: 'producer' } });
  if (key.status !== 201)
    throw new Error(`POST /v1/producer-keys: ${key.status} ${JSON.stringify(key.body)}`);
  return { tenantId: tenant.body.id, tenantKey: tenant.body.tenant_key, producerKey: key.body.key };
}

export async function createEndpoint(
  base: string,
  tenantKey: string,
  url: string,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const res = await http(base, {
    path: '/v1/endpoints',
    token: tenantKey,
    body: { url, event_types: ['*'], ...extra },
  });
  if (res.status !== 201) throw new Error(`POST /v1/endpoints: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id;
}

export interface DeliveryJson {
  id: string;
  endpoint_id: string;
  event_id: string;
  webhook_id: string;
  status: 'pending' | 'delivered' | 'dead' | 'cancelled' | 'skipped';
  status_reason: string | null;
  attempts: number;
  replayed_from: string | null;
}

/** Every delivery of an endpoint (optionally of one status), following `next_cursor`. */
export async function listDeliveries(
  base: string,
  token: string,
  endpointId: string,
  opts: { status?: DeliveryJson['status']; max?: number } = {},
): Promise<DeliveryJson[]> {
  const out: DeliveryJson[] = [];
  let cursor: string | null = null;
  do {
    const q = new URLSearchParams({ limit: String(Math.min(500, opts.max ?? 500)) });
    if (opts.status) q.set('status', opts.status);
    if (cursor) q.set('cursor', cursor);
    const res = await http(base, { path: `/v1/endpoints/${endpointId}/deliveries?${q}`, token });
    if (res.status !== 200)
      throw new Error(`GET deliveries of ${endpointId}: ${res.status} ${JSON.stringify(res.body)}`);
    out.push(...res.body.data);
    cursor = res.body.next_cursor;
  } while (cursor && out.length < (opts.max ?? Number.POSITIVE_INFINITY));
  return out;
}

export interface SentEvent {
  seq: number;
  /** 202; null when never accepted. */
  status: number | null;
  /** Answered with the original event of an earlier try (`idempotent-replayed: true`): that try had committed. */
  replayed: boolean;
  eventId: string | null;
  /** Requests it took (retries after connection errors or 503). */
  tries: number;
  lastError: string | null;
}

/**
 * A steady producer: event `i` is started at `i / perSecond` s after the start (at most `concurrency` in flight)
 * until `signal` aborts. Each event carries an Idempotency-Key, and a request that fails to connect, breaks or is
 * answered 503 is retried (against `target()` as it is then — a restarted process may have a new port) for up to
 * `retryForMs`; the answer that finally comes is 202, or 200 with the original id when the first try had committed.
 */
export async function steadyEvents(opts: {
  target: () => string;
  producerKey: string;
  tenantId: string;
  run: string;
  perSecond: number;
  signal: AbortSignal;
  concurrency?: number;
  retryForMs?: number;
}): Promise<SentEvent[]> {
  const sent: SentEvent[] = [];
  const started = performance.now();
  const inFlight = new Set<Promise<void>>();
  const one = async (seq: number) => {
    const rec: SentEvent = { seq, status: null, eventId: null, replayed: false, tries: 0, lastError: null };
    sent.push(rec);
    const giveUpAt = performance.now() + (opts.retryForMs ?? 10_000);
    for (;;) {
      rec.tries++;
      try {
        const res = await http(opts.target(), {
          path: '/v1/events',
          token: opts.producerKey,
          body: { tenant_id: opts.tenantId, type: 'load.test', data: { seq, run: opts.run } },
          headers: { 'idempotency-key': `${opts.run}-${seq}` },
          timeoutMs: 5_000,
        });
        if (res.status === 202) {
          rec.status = res.status;
          rec.eventId = res.body.id;
          rec.replayed = res.headers['idempotent-replayed'] === 'true';
          return;
        }
        rec.lastError = `${res.status} ${JSON.stringify(res.body)}`;
        if (res.status !== 503) return;
      } catch (err) {
        rec.lastError = errorCode(err);
        if (!isConnectionError(rec.lastError)) return;
      }
      if (performance.now() > giveUpAt) return;
      await sleep(100);
    }
  };
  for (let seq = 0; !opts.signal.aborted; seq++) {
    const wait = started + (seq * 1000) / opts.perSecond - performance.now();
    if (wait > 0) await sleep(wait);
    if (opts.signal.aborted) break;
    while (inFlight.size >= (opts.concurrency ?? 16)) await Promise.race(inFlight);
    const p = one(seq).finally(() => inFlight.delete(p));
    inFlight.add(p);
  }
  await Promise.all(inFlight);
  return sent.sort((a, b) => a.seq - b.seq);
}

/** The store of a delivery end-to-end test, and the environment its processes share. */
export interface DeliveryE2eStore {
  dataDir: string;
  /** The schema's URL on PostgreSQL (`withSearchPath`), null on SQLite. */
  pgUrl: string | null;
  env: Record<string, string>;
  /** What is leased, in flight and not fanned out in this store right now. */
  leaseState(): Promise<LeaseState>;
}

/**
 * A fresh data directory and, on PostgreSQL, a schema of its own, both removed after the file's tests; the
 * environment sets the operator token, a random master key, loopback receivers allowed, 50 ms polls, `env` on top.
 */
export async function deliveryE2eStore(opts: {
  kind: 'sqlite' | 'postgres';
  label: string;
  adminToken: string;
  cleanups: Cleanups;
  env?: Record<string, string>;
}): Promise<DeliveryE2eStore> {
  const dataDir = tempDir(opts.cleanups, opts.label);
  const env: Record<string, string> = {
    HOOKRAIL_ADMIN_TOKEN: opts.adminToken,
    HOOKRAIL_MASTER_KEY: randomBytes(32).toString('base64'),
    HOOKRAIL_DATA_DIR: dataDir,
    HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8',
    HOOKRAIL_POLL_MS: '50',
    ...opts.env,
  };
  const schema = opts.kind === 'postgres' ? await createChildSchema(postgresUrl(), opts.label) : null;
  if (schema) opts.cleanups.push(schema.drop);
  const pgUrl = schema?.url ?? null;
  if (pgUrl) env.DATABASE_URL = pgUrl;
  return {
    dataDir,
    pgUrl,
    env,
    leaseState: () => (pgUrl ? postgresLeaseState(pgUrl) : Promise.resolve(sqliteLeaseState(dataDir))),
  };
}

/** What the queue's bookkeeping holds right now, read from the store itself. */
export interface LeaseState {
  /** Deliveries with a lease owner set. */
  leased: Array<{ id: string; status: string; lease_owner: string; lease_until: number }>;
  /** endpoint_queue rows whose in-flight count is not 0. */
  inflight: Array<{ endpoint_id: string; inflight: number }>;
  /** Events not yet fanned out. */
  fanoutPending: number;
}

const LEASED_SQL =
  'SELECT id, status, lease_owner, lease_until FROM deliveries WHERE lease_owner IS NOT NULL ORDER BY id';
const INFLIGHT_SQL =
  'SELECT endpoint_id, inflight FROM endpoint_queue WHERE inflight <> 0 ORDER BY endpoint_id';
// Not yet fanned out: on SQLite the events after fan-out's cursor (UNFANNED_COUNT_SQL), on PostgreSQL a row each.
const POSTGRES_FANOUT_SQL = 'SELECT count(*) AS n FROM fanout_pending';

export function sqliteLeaseState(dataDir: string): LeaseState {
  const db = new Database(join(dataDir, 'hookrail.db'), { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    return {
      leased: db.prepare(LEASED_SQL).all() as LeaseState['leased'],
      inflight: db.prepare(INFLIGHT_SQL).all() as LeaseState['inflight'],
      fanoutPending: Number((db.prepare(UNFANNED_COUNT_SQL).get() as { n: number }).n),
    };
  } finally {
    db.close();
  }
}

/** `url` must carry the schema (`withSearchPath`). */
export async function postgresLeaseState(url: string): Promise<LeaseState> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const leased = (await client.query(LEASED_SQL)).rows.map((r) => ({
      ...r,
      lease_until: Number(r.lease_until),
    }));
    const inflight = (await client.query(INFLIGHT_SQL)).rows;
    const fanoutPending = Number((await client.query(POSTGRES_FANOUT_SQL)).rows[0].n);
    return { leased, inflight, fanoutPending };
  } finally {
    await client.end();
  }
}
