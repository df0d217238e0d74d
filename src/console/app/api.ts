/**
 * The console's API client: this origin's /v1 API with the tenant key as a bearer token. The key lives in the
 * tab's sessionStorage only (gone when the tab closes; never in a cookie, so other sites cannot act with it).
 */
const KEY = 'hookrail.console.key';

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY),
  set: (key: string) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

/** Fired when the API refuses the key (revoked, or the tenant deleted): the console asks for a key again. */
export const SIGNED_OUT = 'hookrail:signed-out';

export async function api<T>(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
  extra: Record<string, string> = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...extra };
  const key = session.key();
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // Not the API's answer (a proxy's error page, say): reported by status below.
  }
  if (res.ok && (json !== null || res.status === 204)) return json as T;
  const err = (
    json as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | null
  )?.error;
  if (res.status === 401) {
    session.clear();
    window.dispatchEvent(new Event(SIGNED_OUT));
  }
  throw new ApiFailure(
    res.status,
    err?.code ?? 'http_error',
    err?.message ?? `HTTP ${res.status}`,
    err?.details,
  );
}

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

export interface Endpoint {
  id: string;
  tenant_id: string;
  url: string;
  description: string | null;
  event_types: string[];
  ordering: string;
  max_concurrency: number;
  headers: Record<string, string>;
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  created_at: string;
}

export interface Split {
  p50: number | null;
  p99: number | null;
}

export interface Health {
  state: 'healthy' | 'degraded' | 'failing' | 'disabled';
  reasons: string[];
  circuit: { state: string; consecutive_failures: number; next_probe_at: string | null };
  concurrency: { max: number; effective: number; in_flight: number; ramp_ends_at: string | null };
  success_rate_percent: { last_hour: number | null; last_24h: number | null };
  attempts: { last_hour: number; last_24h: number; dead_letters_24h: number };
  latency_ms: { queue: Split; platform: Split; consumer: Split };
  backlog: { depth: number; dead_letters: number; oldest_pending_age_seconds: number | null };
  last_success_at: string | null;
  last_failure_at: string | null;
  failing_since: string | null;
}

export interface StatsBucket {
  start: string;
  attempts: number;
  delivered: number;
  success_rate_percent: number | null;
  latency_ms: { queue: number | null; platform: number | null; consumer: number | null };
  dead_lettered: number;
  backlog: number;
}

export interface Stats {
  window: string;
  bucket_seconds: number;
  buckets: StatsBucket[];
}

export interface Backlog {
  count: number;
  pending: number;
  dead_letters: number;
  oldest_created_at: string | null;
  estimated_drain_seconds: number;
}

export interface Delivery {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  webhook_id: string;
  status: 'pending' | 'delivered' | 'dead' | 'cancelled' | 'skipped';
  status_reason: string | null;
  attempts: number;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  replayed_from: string | null;
  created_at: string;
}

export interface Timings {
  started_at: string;
  queue_ms: number;
  platform_ms: number;
  consumer_ms: number | null;
}

export interface AttemptSummary {
  id: string;
  attempt_no: number;
  outcome: 'delivered' | 'retryable' | 'permanent';
  status_code: number | null;
  error_class: string | null;
  error_message: string | null;
  timings: Timings;
}

export interface AttemptDetail extends AttemptSummary {
  request: {
    url: string;
    hops: { url: string; headers: Record<string, string>; status: number | null }[];
    body: string | null;
    body_size: number | null;
  };
  response: {
    status: number | null;
    headers: Record<string, string>;
    body_base64: string;
    body_text: string | null;
  } | null;
}

export interface SecretRotated {
  id: string;
  secret: string;
  previous: { id: string; active_until: string | null } | null;
}

export interface Replayed {
  count: number;
  more: boolean;
  estimated_seconds: number;
}

export interface SecretMetadata {
  id: string;
  created_at: string;
  active_from: string;
  active_until: string | null;
}

export interface AuditEvent {
  id: string;
  actor: string;
  action: string;
  target_type: string;
  target_id: string;
  details: Record<string, unknown>;
  created_at: string;
}

export interface Notification {
  id: string;
  endpoint_id: string | null;
  kind: string;
  subject: string;
  body: string;
  email_to: string | null;
  status: string;
  created_at: string;
}
