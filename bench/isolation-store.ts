/**
 * The store side of bench/isolation.ts: a fresh SQLite data directory or PostgreSQL schema per run, Hookrail's
 * PostgreSQL backends (their CPU is Hookrail's), and what the store holds after a graceful stop — deliveries and
 * attempts per kind of endpoint, told apart by URL (`/slow/` paths are held by the receiver, `/refused/` points at
 * a port where nothing listens), plus Hookrail's own timeline of every first attempt.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { backendPidsOf, freshPgSchema, type Log } from './support.ts';

export type EndpointKind = 'healthy' | 'slow' | 'refusing';

export interface KindCounts {
  /** Deliveries by status. */
  statuses: Record<string, number>;
  /** Attempts by `outcome/error_class` (error_class empty on success). */
  attempts: Record<string, number>;
}

export interface FirstAttempt {
  /** Hookrail's clock (epoch ms): event accepted, delivery created by fan-out, first attempt started / finished. */
  eventAt: number;
  deliveryAt: number;
  startedAt: number;
  finishedAt: number;
}

export interface StoreReport {
  byKind: Partial<Record<EndpointKind, KindCounts>>;
  /** Event id → its delivery's first attempt (one delivery per event in this benchmark). */
  firstAttempts: Map<string, FirstAttempt>;
  /** Every attempt on a slow or refusing endpoint: when it started (Hookrail's clock) and its error class. */
  badAttempts: Array<{ startedAt: number; errorClass: string }>;
}

export interface RunStore {
  env: Record<string, string>;
  dataDir: string;
  backendPids(hookrailPid: number | undefined): Promise<number[]>;
  /** After Hookrail has stopped. */
  report(): Promise<StoreReport>;
}

const KIND_SQL = `CASE WHEN e.url LIKE '%/slow/%' THEN 'slow' WHEN e.url LIKE '%/refused/%' THEN 'refusing'
  ELSE 'healthy' END`;
const STATUS_SQL = `SELECT ${KIND_SQL} AS kind, d.status AS k, count(*) AS n
  FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id GROUP BY 1, 2`;
const ATTEMPT_SQL = `SELECT ${KIND_SQL} AS kind, a.outcome || '/' || COALESCE(a.error_class, '') AS k, count(*) AS n
  FROM attempts a JOIN endpoints e ON e.id = a.endpoint_id GROUP BY 1, 2`;
const TIMELINE_SQL = `SELECT d.event_id AS id, ev.created_at AS ev, d.created_at AS dl, a.started_at AS st,
    a.finished_at AS fin
  FROM attempts a JOIN deliveries d ON d.id = a.delivery_id JOIN events ev ON ev.id = d.event_id
  WHERE a.attempt_no = 1`;
const BAD_SQL = `SELECT a.started_at AS st, COALESCE(a.error_class, '') AS err
  FROM attempts a JOIN endpoints e ON e.id = a.endpoint_id
  WHERE e.url LIKE '%/slow/%' OR e.url LIKE '%/refused/%'`;

type Row = Record<string, string | number>;

function toReport(statusRows: Row[], attemptRows: Row[], timeline: Row[], bad: Row[]): StoreReport {
  const byKind: StoreReport['byKind'] = {};
  const add = (rows: Row[], field: keyof KindCounts) => {
    for (const r of rows) {
      const kind = String(r.kind) as EndpointKind;
      const counts = byKind[kind] ?? { statuses: {}, attempts: {} };
      byKind[kind] = counts;
      counts[field][String(r.k)] = Number(r.n);
    }
  };
  add(statusRows, 'statuses');
  add(attemptRows, 'attempts');
  const firstAttempts = new Map<string, FirstAttempt>();
  for (const r of timeline) {
    firstAttempts.set(String(r.id), {
      eventAt: Number(r.ev),
      deliveryAt: Number(r.dl),
      startedAt: Number(r.st),
      finishedAt: Number(r.fin),
    });
  }
  const badAttempts = bad.map((r) => ({ startedAt: Number(r.st), errorClass: String(r.err) }));
  return { byKind, firstAttempts, badAttempts };
}

export function sqliteRunStore(dataDir: string): RunStore {
  return {
    env: { DATABASE_URL: '' },
    dataDir,
    backendPids: async () => [],
    report: async () => {
      const db = new Database(join(dataDir, 'hookrail.db'), { readonly: true });
      try {
        const all = (sql: string) => db.prepare(sql).all() as Row[];
        return toReport(all(STATUS_SQL), all(ATTEMPT_SQL), all(TIMELINE_SQL), all(BAD_SQL));
      } finally {
        db.close();
      }
    },
  };
}

/** A schema of its own (dropped at cleanup), so every run starts from an empty store. */
export async function postgresRunStore(dataDir: string, log: Log): Promise<RunStore> {
  const { schema, url, admin } = await freshPgSchema('bench_isolation', log);
  return {
    env: { DATABASE_URL: url },
    dataDir,
    backendPids: (pid) => backendPidsOf(admin, pid, schema),
    report: async () => {
      await admin.query(`SET search_path TO "${schema}"`);
      try {
        const all = async (sql: string) => (await admin.query(sql)).rows as Row[];
        const [st, at, tl, bad] = [STATUS_SQL, ATTEMPT_SQL, TIMELINE_SQL, BAD_SQL];
        return toReport(await all(st), await all(at), await all(tl), await all(bad));
      } finally {
        await admin.query('SET search_path TO DEFAULT');
      }
    },
  };
}

/** Attempts on bad endpoints, and those skipped as circuit_open, per window of `ms` from `t0` (Hookrail's clock). */
export function badAttemptsPerWindow(rep: StoreReport, t0: number, ms: number, windows: number) {
  const bad = new Array<number>(windows).fill(0);
  const skipped = new Array<number>(windows).fill(0);
  for (const a of rep.badAttempts) {
    const w = Math.floor((a.startedAt - t0) / ms);
    if (w < 0 || w >= windows) continue;
    bad[w] = (bad[w] ?? 0) + 1;
    if (a.errorClass === 'circuit_open') skipped[w] = (skipped[w] ?? 0) + 1;
  }
  return { bad, skipped };
}
