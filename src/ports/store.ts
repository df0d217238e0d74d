/**
 * The storage port. SQL lives only in the adapters (`src/adapters/sqlite`, `src/adapters/postgres`); the rest of
 * Hookrail sees these entity-first methods, each taking one params object, with `now` passed in so a fake clock
 * drives every timestamp the store writes. Both adapters pass `test/conformance/store-conformance.ts`.
 *
 * Times are integer milliseconds since the Unix epoch throughout.
 */
import type { AuditOf, DeliveryStore } from './delivery-store.ts';
import type { OperationsStore } from './operations-store.ts';

export interface StoreCapabilities {
  /** Several processes may share this store (PostgreSQL). SQLite is one process. */
  readonly multiProcess: boolean;
  /**
   * Writes submitted in the same event-loop turn share one transaction, run in the order submitted, so a later one
   * sees what an earlier one wrote (SQLite's turn commit, adapters/sqlite/turn-commit.ts). Intake uses it to let
   * fan-out join the transaction of the events it fans out: one commit and one sync instead of two.
   */
  readonly sharedTurn: boolean;
  /** Human name for logs and /readyz; never branch on it — branch on capabilities. */
  readonly kind: 'sqlite' | 'postgres';
}

export interface TenantRecord {
  id: string;
  name: string;
  /** AES-GCM envelope of the step-up TOTP seed (see adapters/crypto). */
  totpSeedSealed: string;
  createdAt: number;
  deletedAt: number | null;
}

/** The step-up guard's memory of one tenant, shared by every process (src/app/step-up.ts). */
export interface StepUpState {
  /** The last TOTP step a step-up accepted; a code of that step or an older one is refused. */
  lastStep: number | null;
  /** Wrong codes counted in the window that began at `failuresSince`. */
  failures: number;
  failuresSince: number | null;
}

export type ApiKeyKind = 'producer' | 'tenant';

export interface ApiKeyRecord {
  id: string;
  kind: ApiKeyKind;
  /** Set for tenant keys; null for producer keys. */
  tenantId: string | null;
  name: string | null;
  /** SHA-256 of the full key, hex. The key itself is never stored. */
  hash: string;
  /** The first characters of the key (`hkp_ab12…`), so a user can tell keys apart. */
  prefix: string;
  createdAt: number;
  revokedAt: number | null;
}

export interface NewEvent {
  id: string;
  tenantId: string;
  type: string;
  resourceId: string | null;
  /** The event's `data` as canonical JSON text, fixed at intake; delivery bodies embed these exact bytes. */
  data: string;
  idempotencyKey: string | null;
  /** SHA-256 of the request's (type, resource_id, data); tells a true retry from a key reused for another request. */
  requestHash: string | null;
  createdAt: number;
  /**
   * The producer's W3C traceparent (domain/trace-context.ts parseTraceparent), kept for the attempts' spans.
   * Absent or null: none. Written with the event, read back only by the lease.
   */
  traceParent?: string | null;
}

export interface EventRecord extends NewEvent {}

export type EventInsertOutcome =
  | { kind: 'created'; event: EventRecord }
  /** The idempotency key was seen within the window with the same request: the original event. */
  | { kind: 'duplicate'; event: EventRecord }
  /** The idempotency key was seen within the window with a different request. */
  | { kind: 'key_conflict'; event: EventRecord };

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

export interface ListParams {
  limit: number;
  /** Opaque to callers; adapters use the last id of the previous page (ids are time-sortable). */
  cursor: string | null;
}

/** Thrown by adapters when the database cannot be reached; the API answers 503 with Retry-After. */
export class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`store unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

export interface Store extends DeliveryStore, OperationsStore {
  readonly capabilities: StoreCapabilities;
  /** Applies pending numbered migrations; safe to call concurrently from several processes. */
  migrate(): Promise<void>;
  /** Resolves when the database answers a trivial query; rejects with StoreUnavailableError otherwise. */
  ping(): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;

  tenantCreate(p: { tenant: TenantRecord; tenantKey: ApiKeyRecord }): Promise<void>;
  /** Live tenants only (not deleted). */
  tenantGet(p: { id: string }): Promise<TenantRecord | null>;
  /** Live tenants only. */
  tenantList(p: ListParams): Promise<Page<TenantRecord>>;
  /**
   * Marks the tenant deleted, revokes its keys, deletes its endpoints and cancels their pending deliveries, in one
   * transaction: once acknowledged, no new attempt starts (ADR-16). False when absent or already deleted.
   */
  tenantDelete(p: { id: string; now: number; audit?: AuditOf<void> }): Promise<boolean>;

  /**
   * Null when the tenant is absent or deleted. The three step-up methods take `tenantId` null for the operator's
   * own step-up (deleting a tenant), kept apart from every tenant's.
   */
  stepUpState(p: { tenantId: string | null }): Promise<StepUpState | null>;
  /**
   * Accepts TOTP step `step` for the tenant if it is newer than the last one accepted (a compare-and-set, so of two
   * processes given one code only one accepts it) and clears the failures. False: already used, or no such tenant.
   */
  stepUpAccept(p: { tenantId: string | null; step: number }): Promise<boolean>;
  /**
   * Counts one step-up try against the tenant's budget before its code is checked (a right code then clears the
   * count): in a new window starting at `now` when the current one began `windowMs` or more ago. False, counting
   * nothing, when `max` tries are already counted in the window, or no such tenant. Counting first, in one
   * statement, is what keeps concurrent guesses inside the budget.
   */
  stepUpCharge(p: { tenantId: string | null; now: number; windowMs: number; max: number }): Promise<boolean>;

  apiKeyCreate(p: { key: ApiKeyRecord }): Promise<void>;
  /** Live (unrevoked) key with this hash, whose tenant (if any) is live. */
  apiKeyFindByHash(p: { hash: string }): Promise<ApiKeyRecord | null>;
  apiKeyList(p: ListParams & { kind: ApiKeyKind }): Promise<Page<ApiKeyRecord>>;
  /** False when absent, of another kind, or already revoked. */
  apiKeyRevoke(p: { id: string; kind: ApiKeyKind; now: number }): Promise<boolean>;
  /**
   * Replaces the tenant's key, in one transaction: revokes every live tenant key of the tenant at `now`, inserts
   * `key` (a tenant key of that tenant) and writes the audit record. Of two replacements at once, one runs after
   * the other, so exactly one key is left live. False, changing nothing and asking for no record, when the tenant
   * is absent or deleted.
   */
  tenantKeyReplace(p: {
    tenantId: string;
    key: ApiKeyRecord;
    now: number;
    audit?: AuditOf<void>;
  }): Promise<boolean>;

  /**
   * Group commit: inserts every event of the batch in ONE transaction (one fsync), resolving only once it is
   * durable. Results are in input order. Idempotency keys are unique per tenant within `idempotencyWindowMs`,
   * also across concurrent batches and processes; a key older than the window is free again. Two items of the
   * same batch sharing a key resolve to the same event.
   */
  eventInsertBatch(p: {
    events: NewEvent[];
    now: number;
    idempotencyWindowMs: number;
  }): Promise<EventInsertOutcome[]>;
  /** `tenantId` null means any tenant (operator reads). */
  eventGet(p: { id: string; tenantId: string | null }): Promise<EventRecord | null>;
  /** Newest first. */
  eventList(p: ListParams & { tenantId: string | null; type?: string | null }): Promise<Page<EventRecord>>;

  /**
   * The committed-event stream for fan-out: events durably accepted and not yet fanned out, oldest first. Every
   * insert by eventInsertBatch enqueues here in the same transaction (SQLite: the event log itself, after fan-out's
   * cursor), so nothing committed is ever missed. Returns how many are waiting.
   */
  fanoutPendingCount(): Promise<number>;
  /**
   * Deletes up to `limit` expired idempotency records (older than the window), oldest first; returns how many. A
   * bounded batch: one DELETE of a backlog built up while maintenance was down outlasted PostgreSQL's statement
   * deadline on every pass (the keys then grew for ever), and held SQLite's write lock as long as it ran.
   */
  idempotencyPrune(p: { olderThan: number; limit: number }): Promise<number>;
  /**
   * The store's own upkeep of its queue tables, run by the maintenance role on every pass. PostgreSQL: a VACUUM of
   * the small tables that are rewritten many times a second (fanout_pending, endpoint_queue), so the fan-out claim
   * and the lease do not walk thousands of dead row versions between autovacuum runs (or without autovacuum at
   * all). SQLite reuses deleted space at once and needs nothing.
   */
  housekeeping(): Promise<void>;
}
