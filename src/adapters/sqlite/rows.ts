/** Row mapping for the SQLite delivery plane: rows to the records of src/ports/delivery-store.ts, and paging. */
import type Database from 'better-sqlite3';
import type {
  AttemptRecord,
  DeliveryRecord,
  DeliveryStatus,
  EndpointRecord,
  SecretRecord,
} from '../../ports/delivery-store.ts';
import type { Page } from '../../ports/store.ts';

export type Row = Record<string, unknown>;
/**
 * The connection's cached prepared statements, by SQL text.
 *
 * A bound LIMIT is written `LIMIT ? + 0`, never `LIMIT ?`: with a bare parameter SQLite (3.53, as bundled by
 * better-sqlite3 12) prepares the statement again on every call (perf shows `sqlite3Reprepare` under each step; the
 * planner looks at the bound value, so every new binding expires the plan). Measured on the lease's endpoint read:
 * 55 µs a call with `LIMIT ?`, 2.3 µs with `LIMIT ? + 0`; in bulk the due-row read fell from 245 µs a call. An
 * expression is not looked at while planning. sql-text.test.ts keeps bare bound LIMITs out of this adapter.
 */
export type St = (sql: string) => Database.Statement;

export const endpointFromRow = (r: Row): EndpointRecord => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  url: r.url as string,
  description: (r.description as string | null) ?? null,
  eventTypes: JSON.parse(r.event_types as string),
  ordering: r.ordering as EndpointRecord['ordering'],
  maxConcurrency: r.max_concurrency as number,
  headers: JSON.parse(r.headers as string),
  status: r.status as EndpointRecord['status'],
  disabledReason: (r.disabled_reason as string | null) ?? null,
  createdAt: r.created_at as number,
  updatedAt: r.updated_at as number,
});

export const secretFromRow = (r: Row): SecretRecord => ({
  id: r.id as string,
  endpointId: r.endpoint_id as string,
  tenantId: r.tenant_id as string,
  sealed: r.sealed as string,
  activeFrom: r.active_from as number,
  activeUntil: (r.active_until as number | null) ?? null,
  createdAt: r.created_at as number,
});

export const deliveryFromRow = (r: Row): DeliveryRecord => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  endpointId: r.endpoint_id as string,
  eventId: r.event_id as string,
  eventType: r.event_type as string,
  resourceId: (r.resource_id as string | null) ?? null,
  webhookId: r.webhook_id as string,
  status: r.status as DeliveryStatus,
  attempts: r.attempts as number,
  nextAttemptAt: (r.next_attempt_at as number | null) ?? null,
  firstAttemptAt: (r.first_attempt_at as number | null) ?? null,
  lastAttemptAt: (r.last_attempt_at as number | null) ?? null,
  statusReason: (r.status_reason as string | null) ?? null,
  replayedFrom: (r.replayed_from as string | null) ?? null,
  createdAt: r.created_at as number,
  updatedAt: r.updated_at as number,
});

export const attemptFromRow = (r: Row): AttemptRecord => ({
  id: r.id as string,
  deliveryId: r.delivery_id as string,
  endpointId: r.endpoint_id as string,
  tenantId: r.tenant_id as string,
  eventId: (r.event_id as string | null) ?? null,
  attemptNo: r.attempt_no as number,
  url: r.url as string,
  dueAt: r.due_at as number,
  startedAt: r.started_at as number,
  finishedAt: r.finished_at as number,
  outcome: r.outcome as AttemptRecord['outcome'],
  statusCode: (r.status_code as number | null) ?? null,
  errorClass: (r.error_class as string | null) ?? null,
  errorMessage: (r.error_message as string | null) ?? null,
  request: JSON.parse(r.request as string),
  responseHeaders: r.response_headers ? JSON.parse(r.response_headers as string) : null,
  responseBody: (r.response_body as string | null) ?? null,
  queueMs: r.queue_ms as number,
  platformMs: r.platform_ms as number,
  consumerMs: (r.consumer_ms as number | null) ?? null,
});

export function page<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const more = rows.length > limit;
  const data = more ? rows.slice(0, limit) : rows;
  return { data, nextCursor: more ? (data[data.length - 1]?.id ?? null) : null };
}

export const tenantClause = (tenantId: string | null, alias = '') =>
  tenantId === null
    ? { sql: '', args: [] as unknown[] }
    : { sql: ` AND ${alias}tenant_id = ?`, args: [tenantId] };
