/**
 * HTTP helpers for end-to-end tests against Hookrail child processes: JSON calls over real sockets, tenant and
 * producer-key setup through the operator token, concurrent POST /v1/events load that records the outcome of every
 * request, and the check that every event answered 202 can be read back.
 */
import { Agent, request } from 'undici';

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  ms: number;
}

/** One keep-alive agent per test file is plenty; each call may bring its own (load generators do). */
const defaultAgent = new Agent({ connections: 64, keepAliveTimeout: 1_000 });

export async function http(
  base: string,
  opts: {
    method?: 'GET' | 'POST' | 'DELETE';
    path: string;
    token?: string;
    body?: unknown;
    headers?: Record<string, string>;
    timeoutMs?: number;
    dispatcher?: Agent;
  },
): Promise<HttpResult> {
  const started = performance.now();
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await request(new URL(opts.path, base), {
    method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'),
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    dispatcher: opts.dispatcher ?? defaultAgent,
    headersTimeout: opts.timeoutMs ?? 10_000,
    bodyTimeout: opts.timeoutMs ?? 10_000,
  });
  const text = await res.body.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.statusCode, headers: res.headers, body, ms: performance.now() - started };
}

/** Errors that mean "the connection failed or broke" (the server died, closed or refused), as opposed to a hang. */
const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT',
]);
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

export function errorCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.code ?? e?.cause?.code;
  return typeof code === 'string' ? code : String((err as Error)?.message ?? err);
}

export const isConnectionError = (code: string) => CONNECTION_ERROR_CODES.has(code);
export const isTimeout = (code: string) => TIMEOUT_CODES.has(code);

/** A tenant and a producer key created through the operator token. */
export async function setupTenant(
  base: string,
  adminToken: string,
): Promise<{ tenantId: string; producerKey: string }> {
  const tenant = await http(base, { path: '/v1/tenants', token: adminToken, body: { name: 'e2e tenant' } });
  if (tenant.status !== 201)
    throw new Error(`POST /v1/tenants: ${tenant.status} ${JSON.stringify(tenant.body)}`);
  const key = await http(base, {
    path: '/v1/producer-keys',
    token: adminToken,
    body: { name: 'e2e producer' },
  });
  if (key.status !== 201)
    throw new Error(`POST /v1/producer-keys: ${key.status} ${JSON.stringify(key.body)}`);
  return { tenantId: tenant.body.id, producerKey: key.body.key };
}

export interface SendRecord {
  /** Which base URL it went to. */
  target: string;
  seq: number;
  data: { seq: number; run: string };
  idempotencyKey: string | null;
  /** performance.now() times. */
  startedAt: number;
  endedAt: number;
  status: number | null;
  eventId: string | null;
  errorCode: string | null;
  retryAfter: string | null;
  body: unknown;
}

export interface LoadOptions {
  targets: string[];
  producerKey: string;
  tenantId: string;
  concurrency: number;
  /** Label stored in every event's data, so runs are told apart. */
  run: string;
  /** The load stops starting requests once this is aborted (in-flight ones still finish). */
  signal: AbortSignal;
  /** A sender stops after its first connection error (the process is gone) instead of trying again. */
  stopSenderOnConnectionError?: boolean;
  /** Pause after an error or a non-2xx answer before the next request (a well-behaved client backs off). */
  backoffMs?: number;
  /** Per-request timeout: a request that takes longer counts as a hang. */
  timeoutMs?: number;
  /** Idempotency key per request (null: none). */
  idempotencyKey?: (seq: number) => string | null;
  /** Called after every completed request (for test-side bookkeeping). */
  onRecord?: (r: SendRecord) => void;
}

/**
 * `concurrency` senders, each sending POST /v1/events back to back (round-robin over `targets`) until the signal
 * aborts, recording every request. Each sender has its own connection pool, like independent producers.
 */
export async function runLoad(opts: LoadOptions): Promise<SendRecord[]> {
  const records: SendRecord[] = [];
  let seq = 0;
  const agents: Agent[] = [];
  const sender = async (n: number) => {
    const agent = new Agent({ connections: 1, pipelining: 1, keepAliveTimeout: 5_000 });
    agents.push(agent);
    let i = n;
    while (!opts.signal.aborted) {
      const mySeq = seq++;
      const target = opts.targets[i++ % opts.targets.length] as string;
      const data = { seq: mySeq, run: opts.run };
      const key = opts.idempotencyKey?.(mySeq) ?? null;
      const rec: SendRecord = {
        target,
        seq: mySeq,
        data,
        idempotencyKey: key,
        startedAt: performance.now(),
        endedAt: 0,
        status: null,
        eventId: null,
        errorCode: null,
        retryAfter: null,
        body: null,
      };
      try {
        const res = await http(target, {
          path: '/v1/events',
          token: opts.producerKey,
          body: { tenant_id: opts.tenantId, type: 'load.test', data },
          headers: key ? { 'idempotency-key': key } : {},
          timeoutMs: opts.timeoutMs ?? 15_000,
          dispatcher: agent,
        });
        rec.status = res.status;
        rec.body = res.body;
        const ra = res.headers['retry-after'];
        rec.retryAfter = typeof ra === 'string' ? ra : null;
        if (res.status === 202) rec.eventId = (res.body as { id?: string })?.id ?? null;
      } catch (err) {
        rec.errorCode = errorCode(err);
      }
      rec.endedAt = performance.now();
      records.push(rec);
      opts.onRecord?.(rec);
      if (rec.errorCode !== null && opts.stopSenderOnConnectionError && isConnectionError(rec.errorCode))
        break;
      if ((rec.errorCode !== null || (rec.status ?? 0) >= 300) && opts.backoffMs) {
        await new Promise((r) => setTimeout(r, opts.backoffMs));
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency }, (_, n) => sender(n)));
  } finally {
    await Promise.all(agents.map((a) => a.destroy().catch(() => undefined)));
  }
  return records;
}

/** Tallies statuses and error codes, e.g. `{"202": 812, "ECONNRESET": 3}`. */
export function tally(records: SendRecord[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of records) {
    const k = r.errorCode ?? String(r.status);
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/**
 * Reads every accepted event back through GET /v1/events/:id (operator token) and returns the ones that are
 * missing or differ from what was sent. Empty means every 202 is durable and intact.
 */
export async function findUnreadable(
  base: string,
  adminToken: string,
  accepted: SendRecord[],
  opts: { tenantId: string; concurrency?: number },
): Promise<Array<{ id: string; seq: number; status: number; body: unknown }>> {
  const bad: Array<{ id: string; seq: number; status: number; body: unknown }> = [];
  const agent = new Agent({ connections: opts.concurrency ?? 16, keepAliveTimeout: 2_000 });
  let next = 0;
  const worker = async () => {
    while (next < accepted.length) {
      const rec = accepted[next++] as SendRecord;
      const id = rec.eventId as string;
      const res = await http(base, { path: `/v1/events/${id}`, token: adminToken, dispatcher: agent });
      const ok =
        res.status === 200 &&
        res.body?.id === id &&
        res.body?.tenant_id === opts.tenantId &&
        res.body?.type === 'load.test' &&
        res.body?.data?.seq === rec.data.seq &&
        res.body?.data?.run === rec.data.run;
      if (!ok) bad.push({ id, seq: rec.seq, status: res.status, body: res.body });
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency ?? 16 }, worker));
  } finally {
    await agent.destroy();
  }
  return bad;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns true, or throws after `timeoutMs` with the last value/error in the message. */
export async function waitUntil(
  what: string,
  fn: () => Promise<boolean>,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<number> {
  const started = performance.now();
  let last: unknown = null;
  while (performance.now() - started < (opts.timeoutMs ?? 10_000)) {
    try {
      if (await fn()) return performance.now() - started;
      last = 'false';
    } catch (err) {
      last = errorCode(err);
    }
    await sleep(opts.intervalMs ?? 100);
  }
  throw new Error(`${what}: not within ${opts.timeoutMs ?? 10_000} ms (last: ${String(last)})`);
}
