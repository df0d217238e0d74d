/**
 * Helpers shared by the benchmark scripts: child processes that are always cleaned up, CPU accounting from /proc,
 * an idle-machine gate, a throwaway PostgreSQL schema, percentiles, and a clock that every process on the machine
 * shares.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { resolve } from 'node:path';
import pg from 'pg';

export const ROOT = resolve(import.meta.dirname, '..');
export const DEFAULT_PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 20_000;

export type Log = (msg: string) => void;
export const logger =
  (name: string): Log =>
  (msg) =>
    process.stderr.write(`[${name}] ${msg}\n`);

/**
 * Milliseconds on the machine's monotonic clock (libuv hrtime = CLOCK_MONOTONIC on Linux), comparable between
 * processes on the same machine — unlike performance.now(), whose origin is per process — and immune to NTP steps.
 */
export const machineMs = (): number => Number(process.hrtime.bigint()) / 1e6;

// ---------------------------------------------------------------------------------------------- cleanups

/** Children and resources to release, newest first, on the way out (also on Ctrl-C). */
const cleanups: Array<() => Promise<void> | void> = [];

export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}

export async function runCleanups(log: Log): Promise<void> {
  for (const fn of cleanups.splice(0).reverse()) {
    try {
      await fn();
    } catch (err) {
      log(`cleanup failed: ${String(err)}`);
    }
  }
}

/** Runs `main`, always cleans up (also on SIGINT/SIGTERM), exits with its code. */
export function runMain(main: () => Promise<number>, log: Log): void {
  let interrupted = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      if (interrupted) return;
      interrupted = true;
      log(`${signal}: cleaning up`);
      void runCleanups(log).then(() => process.exit(130));
    });
  }
  main()
    .then(
      async (code) => {
        await runCleanups(log);
        return code;
      },
      async (err: unknown) => {
        log(`error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
        await runCleanups(log);
        return 1;
      },
    )
    .then((code) => process.exit(code));
}

// ---------------------------------------------------------------------------------------------- processes

export interface Server {
  child: ChildProcess;
  url: string;
  /** The whole stdout line that announced the URL (a server may announce more there, e.g. a control port). */
  banner: string;
  /** SIGTERM, SIGKILL after 20 s; resolves with the exit code. Idempotent. */
  stop(): Promise<number | null>;
}

/** Spawns a long-running process that prints "listening on <url>" on stdout once it accepts connections. */
export async function startServer(name: string, args: string[], env: NodeJS.ProcessEnv): Promise<Server> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    if (stderr.length > 100_000) stderr = stderr.slice(-50_000);
    process.stderr.write(chunk.replace(/^(?=.)/gm, `[${name}] `));
  });
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  let stopping: Promise<number | null> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      const code = await exited;
      clearTimeout(timer);
      return code;
    })();
    return stopping;
  };
  onCleanup(async () => {
    await stop();
  });

  const [url, banner] = await new Promise<[string, string]>((resolveUrl, reject) => {
    let stdout = '';
    const timer = setTimeout(
      () => reject(new Error(`${name} did not start within ${START_TIMEOUT_MS} ms`)),
      START_TIMEOUT_MS,
    );
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      const m = /^.*listening on (http:\/\/\S+).*\n/m.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolveUrl([m[1] as string, m[0].trimEnd()]);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (code ${code}) before listening:\n${stderr}${stdout}`));
    });
  });
  return { child, url, banner, stop };
}

/**
 * Runs a TypeScript worker script to completion in its own process; returns the last stdout line, parsed.
 * `onStart` gets the child's pid (e.g. to count its CPU as the benchmark's own while it runs).
 */
export async function runWorker<T>(
  script: string,
  spec: unknown,
  onStart?: (pid: number) => void,
): Promise<T> {
  const child = spawn(process.execPath, ['--import', 'tsx', resolve(ROOT, script), JSON.stringify(spec)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (child.pid !== undefined) onStart?.(child.pid);
  onCleanup(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  if (code !== 0) throw new Error(`${script} exited with code ${code}`);
  return JSON.parse(stdout.trim().split('\n').pop() ?? '') as T;
}

// ---------------------------------------------------------------------------------------------- CPU

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** User+system CPU time of a process so far, in ms (Linux /proc); null elsewhere. */
export function cpuMsOf(pid: number | undefined): number | null {
  const t = cpuTimesOf(pid);
  return t ? t.user + t.system : null;
}

/** User and system CPU time of a process so far, in ms (Linux /proc); null elsewhere. */
export function cpuTimesOf(pid: number | undefined): { user: number; system: number } | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: (Number(fields[11]) * 1000) / CLK_TCK, system: (Number(fields[12]) * 1000) / CLK_TCK };
  } catch {
    return null;
  }
}

/** CPU time of the whole machine so far (Linux /proc/stat), in ms summed over cores: busy (incl. steal), steal, total. */
export interface MachineCpu {
  busy: number;
  steal: number;
  total: number;
}
export function machineCpu(): MachineCpu | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] as string;
    const v = line
      .trim()
      .split(/\s+/)
      .slice(1, 9)
      .map((x) => (Number(x) * 1000) / CLK_TCK);
    const total = v.reduce((a, b) => a + b, 0);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    return { busy: total - idle, steal: v[7] ?? 0, total };
  } catch {
    return null;
  }
}
export const cpuShare = (a: MachineCpu, b: MachineCpu, key: 'busy' | 'steal') =>
  (b[key] - a[key]) / Math.max(1, b.total - a.total);

/** Local TCP ports of a process's sockets (Linux /proc), e.g. to find its PostgreSQL backends by client_port. */
export function tcpLocalPortsOf(pid: number | undefined): Set<number> {
  const ports = new Set<number>();
  if (pid === undefined) return ports;
  try {
    const inodes = new Set<string>();
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1] as string);
      } catch {
        // closed meanwhile
      }
    }
    for (const table of ['tcp', 'tcp6']) {
      for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
        const f = line.trim().split(/\s+/);
        if (f.length > 9 && inodes.has(f[9] as string))
          ports.add(Number.parseInt(f[1]?.split(':')[1] ?? '', 16));
      }
    }
  } catch {
    // not Linux, or the process is gone
  }
  return ports;
}

/** CPU counters at one moment: the machine's, some processes', and this process's own. */
export interface CpuSnapshot {
  machine: MachineCpu | null;
  pids: Array<{ pid: number | undefined; ms: number | null }>;
  self: NodeJS.CpuUsage;
}

export function cpuSnapshot(pids: Array<number | undefined>): CpuSnapshot {
  return {
    machine: machineCpu(),
    pids: pids.map((pid) => ({ pid, ms: cpuMsOf(pid) })),
    self: process.cpuUsage(),
  };
}

/**
 * Share of all cores used since `a` by processes other than the snapshot's, this process and `extraMs` of CPU
 * reported by children that have exited meanwhile: how much another job on the machine skewed a measurement.
 */
export function foreignShareSince(a: CpuSnapshot, extraMs: number): number | null {
  const m = machineCpu();
  if (!a.machine || !m) return null;
  let ours = extraMs;
  for (const p of a.pids) {
    const now = cpuMsOf(p.pid);
    if (p.ms === null) return null;
    // A process that exited since (a pooled PostgreSQL connection closed when idle): its CPU since the
    // snapshot is unknown and counts as foreign, which overstates the share rather than losing it.
    if (now !== null) ours += now - p.ms;
  }
  const self = process.cpuUsage(a.self);
  ours += (self.user + self.system) / 1000;
  return Math.max(0, (m.busy - a.machine.busy - ours) / Math.max(1, m.total - a.machine.total));
}

/**
 * Waits until the machine is idle (< 15 % busy over a second) before a load phase, for at most a minute: another
 * job on a 2-core box skews every number, and a ceiling and the service must be measured under the same conditions.
 */
export async function waitForIdle(what: string, log: Log): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (let first = true; ; first = false) {
    const a = machineCpu();
    await new Promise((r) => setTimeout(r, 1000));
    const b = machineCpu();
    if (!a || !b) return;
    const busy = cpuShare(a, b, 'busy');
    if (busy < 0.15) {
      if (!first) log(`machine idle again (${Math.round(100 * busy)}% busy); loading ${what}`);
      return;
    }
    if (Date.now() > deadline) {
      log(
        `warning: machine still ${Math.round(100 * busy)}% busy; loading ${what} anyway — results are skewed`,
      );
      return;
    }
    if (first)
      log(`machine ${Math.round(100 * busy)}% busy (another job?); waiting up to 60 s before ${what}`);
  }
}

// ---------------------------------------------------------------------------------------------- PostgreSQL

export interface PgSchema {
  schema: string;
  /**
   * DATABASE_URL for Hookrail: the base URL with `options=-c search_path=<schema>` (verified to be honoured) and
   * `application_name=<schema>`, by which backendPidsOf finds the backends serving the run over TCP or a Unix socket.
   */
  url: string;
  /** An admin connection (default search_path) for counting afterwards; closed at cleanup. */
  admin: pg.Client;
}

/** A fresh schema in DATABASE_URL's database (default DEFAULT_PG_URL), dropped at cleanup. */
export async function freshPgSchema(prefix: string, log: Log): Promise<PgSchema> {
  const baseUrl = process.env.DATABASE_URL || DEFAULT_PG_URL;
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  onCleanup(async () => {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    log(`dropped schema ${schema}`);
  });
  await admin.query(`CREATE SCHEMA "${schema}"`);
  // Hookrail's CLI takes the schema from the connection's search_path (libpq `options`, honoured by pg).
  const url = `${baseUrl}${baseUrl.includes('?') ? '&' : '?'}options=-c%20search_path%3D${schema}&application_name=${schema}`;
  const probe = new pg.Client({ connectionString: url });
  await probe.connect();
  const current = (await probe.query<{ s: string | null }>('SELECT current_schema() AS s')).rows[0]?.s;
  await probe.end();
  if (current !== schema) {
    throw new Error(`the URL's search_path was not honoured (current_schema ${current}, wanted ${schema})`);
  }
  log(`postgres schema ${schema} (search_path verified)`);
  return { schema, url, admin };
}

/**
 * PostgreSQL backends serving a process: those whose client port is one of that process's local TCP ports, or,
 * given the run's schema, those whose application_name is the schema (freshPgSchema's URL sets it), which also
 * finds backends reached over a Unix socket (no client port).
 */
export async function backendPidsOf(
  admin: pg.Client,
  pid: number | undefined,
  schema?: string,
): Promise<number[]> {
  const ports = tcpLocalPortsOf(pid);
  const rows = (
    await admin.query<{ pid: number; port: number | null; app: string }>(
      'SELECT pid, client_port AS port, application_name AS app FROM pg_stat_activity WHERE pid <> pg_backend_pid()',
    )
  ).rows;
  return rows
    .filter((r) => (r.port !== null && ports.has(r.port)) || (schema !== undefined && r.app === schema))
    .map((r) => r.pid);
}

/** Nearest-rank percentile of an ascending-sorted array. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i] as number;
}

export const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

/** The event `data` of the delivery benchmark, padded so the whole POST /v1/events body is about `bytes` long. */
export function eventData(bytes: number): Record<string, unknown> {
  const data = {
    order_id: 'ord_01J9ZBENCH000000000000000',
    status: 'paid',
    currency: 'EUR',
    total_cents: 15_980,
    customer: { id: 'cus_8842', email: 'ada@example.com', name: 'Ada Lovelace', country: 'GB' },
    items: [
      { sku: 'SKU-1001', name: 'Analytical engine, small', qty: 1, unit_cents: 9_990 },
      { sku: 'SKU-2002', name: 'Punched cards (500)', qty: 2, unit_cents: 2_995 },
    ],
    shipping: { method: 'express', address: { line1: '12 St James Sq', city: 'London', postcode: 'SW1Y' } },
    metadata: { source: 'bench', note: '' },
  };
  const overhead = 90; // {"tenant_id":"ten_…","type":"bench.e…","data":…}
  const pad = bytes - overhead - JSON.stringify(data).length;
  if (pad > 0) data.metadata.note = 'x'.repeat(pad);
  return data;
}

/** POST with a bearer token; throws on a non-2xx answer. */
export async function postJson<T>(url: string, token: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`POST ${path} answered ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}
