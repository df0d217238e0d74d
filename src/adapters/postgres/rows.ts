/**
 * Row shapes of the PostgreSQL delivery-plane tables, their column lists, and the mappers between rows and the
 * records of src/ports/delivery-store.ts.
 */
import { type EndpointRuntime, runtimeIndexColumns } from '../../domain/endpoint-runtime.ts';
import type {
  AttemptRecord,
  DeliveryRecord,
  DeliveryStatus,
  EndpointRecord,
  SecretRecord,
} from '../../ports/delivery-store.ts';
import type { Page } from '../../ports/store.ts';

export interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string | null;
  event_types: string;
  ordering: EndpointRecord['ordering'];
  max_concurrency: number;
  headers: string;
  status: EndpointRecord['status'];
  disabled_reason: string | null;
  created_at: number;
  updated_at: number;
}

export interface SecretRow {
  id: string;
  endpoint_id: string;
  tenant_id: string;
  sealed: string;
  active_from: number;
  active_until: number | null;
  created_at: number;
}

export interface DeliveryRow {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  resource_id: string | null;
  webhook_id: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: number | null;
  first_attempt_at: number | null;
  last_attempt_at: number | null;
  status_reason: string | null;
  replayed_from: string | null;
  created_at: number;
  updated_at: number;
}

export interface AttemptRow {
  id: string;
  delivery_id: string;
  endpoint_id: string;
  tenant_id: string;
  attempt_no: number;
  url: string;
  due_at: number;
  started_at: number;
  finished_at: number;
  outcome: AttemptRecord['outcome'];
  status_code: number | null;
  error_class: string | null;
  error_message: string | null;
  request: string;
  response_headers: string | null;
  response_body: string | null;
  queue_ms: number;
  platform_ms: number;
  consumer_ms: number | null;
  event_id: string | null;
}

export const ENDPOINT_COLUMNS =
  'id, tenant_id, url, description, event_types, ordering, max_concurrency, headers, status, disabled_reason, created_at, updated_at';
export const SECRET_COLUMNS = 'id, endpoint_id, tenant_id, sealed, active_from, active_until, created_at';
export const DELIVERY_COLUMNS =
  'id, tenant_id, endpoint_id, event_id, event_type, resource_id, webhook_id, status, attempts, next_attempt_at, first_attempt_at, last_attempt_at, status_reason, replayed_from, created_at, updated_at';
export const ATTEMPT_COLUMNS =
  'id, delivery_id, endpoint_id, tenant_id, attempt_no, url, due_at, started_at, finished_at, outcome, status_code, error_class, error_message, request, response_headers, response_body, queue_ms, platform_ms, consumer_ms, event_id';
export const prefixed = (alias: string, cols: string) =>
  cols
    .split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');

export const toEndpoint = (r: EndpointRow): EndpointRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  url: r.url,
  description: r.description,
  eventTypes: JSON.parse(r.event_types),
  ordering: r.ordering,
  maxConcurrency: r.max_concurrency,
  headers: JSON.parse(r.headers),
  status: r.status,
  disabledReason: r.disabled_reason,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const toSecret = (r: SecretRow): SecretRecord => ({
  id: r.id,
  endpointId: r.endpoint_id,
  tenantId: r.tenant_id,
  sealed: r.sealed,
  activeFrom: r.active_from,
  activeUntil: r.active_until,
  createdAt: r.created_at,
});

export const toDelivery = (r: DeliveryRow): DeliveryRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  endpointId: r.endpoint_id,
  eventId: r.event_id,
  eventType: r.event_type,
  resourceId: r.resource_id,
  webhookId: r.webhook_id,
  status: r.status,
  attempts: r.attempts,
  nextAttemptAt: r.next_attempt_at,
  firstAttemptAt: r.first_attempt_at,
  lastAttemptAt: r.last_attempt_at,
  statusReason: r.status_reason,
  replayedFrom: r.replayed_from,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const toAttempt = (r: AttemptRow): AttemptRecord => ({
  id: r.id,
  deliveryId: r.delivery_id,
  endpointId: r.endpoint_id,
  tenantId: r.tenant_id,
  eventId: r.event_id,
  attemptNo: r.attempt_no,
  url: r.url,
  dueAt: r.due_at,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  outcome: r.outcome,
  statusCode: r.status_code,
  errorClass: r.error_class,
  errorMessage: r.error_message,
  request: JSON.parse(r.request),
  responseHeaders: r.response_headers === null ? null : JSON.parse(r.response_headers),
  responseBody: r.response_body,
  queueMs: r.queue_ms,
  platformMs: r.platform_ms,
  consumerMs: r.consumer_ms,
});

/** Fetch limit+1 rows (newest first); the extra row only says whether a next page exists. */
export function toPage<R, T extends { id: string }>(rows: R[], limit: number, map: (r: R) => T): Page<T> {
  const data = rows.slice(0, limit).map(map);
  return { data, nextCursor: rows.length > limit && data.length > 0 ? data[data.length - 1]!.id : null };
}

/**
 * A runtime record as stored: the JSON text and its index columns, in the order the SQL writing them takes them.
 */
export const runtimeColumns = (rt: EndpointRuntime) => {
  const cols = runtimeIndexColumns(rt);
  return {
    json: JSON.stringify(rt),
    failingSince: cols.failingSince,
    digestDueAt: cols.digestDueAt,
    blockedUntil: cols.blockedUntil,
  };
};
