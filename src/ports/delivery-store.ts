/**
 * The delivery plane's storage: endpoints and their signing secrets, fan-out, deliveries (the queue, a projection)
 * and the append-only attempt log. Same conventions as store.ts: entity-first methods, one params object, `now`
 * passed in, integer milliseconds.
 */
import type { LaneBinding } from '../domain/lanes.ts';
import type { ListParams, Page } from './store.ts';

export type Ordering = 'none' | 'endpoint' | 'resource';
export type EndpointStatus = 'enabled' | 'disabled';

export interface EndpointRecord {
  id: string;
  tenantId: string;
  url: string;
  description: string | null;
  /** Exact types, `prefix.*`, or `*`. */
  eventTypes: string[];
  ordering: Ordering;
  maxConcurrency: number;
  /** Custom headers sent with every delivery (validated at the API). */
  headers: Record<string, string>;
  status: EndpointStatus;
  disabledReason: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface SecretRecord {
  id: string;
  endpointId: string;
  tenantId: string;
  /** KeyService envelope of the `whsec_…` string, bound to tenant and endpoint ids. */
  sealed: string;
  activeFrom: number;
  /** null: active until rotated away. */
  activeUntil: number | null;
  createdAt: number;
}

export type EndpointPatch = Partial<
  Pick<EndpointRecord, 'url' | 'description' | 'eventTypes' | 'ordering' | 'maxConcurrency' | 'headers'>
>;

/** `skipped`: left undelivered by an explicit re-enable choice (kept as a record). */
export type DeliveryStatus = 'pending' | 'delivered' | 'dead' | 'cancelled' | 'skipped';

export interface DeliveryRecord {
  id: string;
  tenantId: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  resourceId: string | null;
  /** The `webhook-id`: minted at fan-out, identical on every attempt and replay. */
  webhookId: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number | null;
  firstAttemptAt: number | null;
  lastAttemptAt: number | null;
  /** Why it was dead-lettered or cancelled: 'max_attempts', 'max_age', 'permanent_failure', 'endpoint_deleted' … */
  statusReason: string | null;
  replayedFrom: string | null;
  createdAt: number;
  updatedAt: number;
}

/** What a delivery worker needs to make one attempt, read in the leasing transaction. */
export interface LeasedDelivery {
  delivery: DeliveryRecord;
  endpoint: { id: string; tenantId: string; url: string; headers: Record<string, string> };
  /** `traceParent`: the producer's, when it sent one (the attempt's span joins that trace). */
  event: { id: string; type: string; createdAt: number; data: string; traceParent?: string | null };
  leaseUntil: number;
  /**
   * What the circuit decided in the leasing transaction: `send` normally; `probe` — the one request allowed while
   * the circuit is open; `circuit_open` — do not send, record a failed `circuit_open` attempt and reschedule.
   */
  mode?: 'send' | 'probe' | 'circuit_open';
}

export type AttemptOutcome = 'delivered' | 'retryable' | 'permanent';

export interface AttemptRecord {
  id: string;
  deliveryId: string;
  endpointId: string;
  tenantId: string;
  /**
   * The delivery's event: what ties the attempt back to it when the delivery row is lost (ADR-15;
   * OperationsStore.deliveryReconstruct). Null on attempts recorded before it was kept (SQLite migration 0018,
   * PostgreSQL 0017).
   */
  eventId: string | null;
  /** 1-based. */
  attemptNo: number;
  url: string;
  /** When the attempt was due; queue wait = startedAt - dueAt. */
  dueAt: number;
  startedAt: number;
  finishedAt: number;
  outcome: AttemptOutcome;
  /** null when no response arrived. */
  statusCode: number | null;
  /** Transport error class, 'http_status', or null when delivered. */
  errorClass: string | null;
  errorMessage: string | null;
  /** Every hop with the exact headers sent (signatures included). */
  request: { hops: Array<{ url: string; headers: Record<string, string>; status: number | null }> };
  responseHeaders: Record<string, string> | null;
  /** First 4 KiB of the response body, base64. */
  responseBody: string | null;
  queueMs: number;
  platformMs: number;
  consumerMs: number | null;
}

/** The result of one attempt and the delivery's next state, written together (attempt appended, projection updated). */
export interface AttemptCompletion {
  attempt: AttemptRecord;
  leaseOwner: string;
  /**
   * The `leaseUntil` of the lease the attempt was made under (LeasedDelivery.leaseUntil). With the owner it names
   * that one lease: the owner is per process, so after a lease expired and the same process leased the delivery
   * again, the owner alone would match the new lease too. A completion whose lease no longer holds is a late one
   * (the attempt is recorded; the delivery and its in-flight slot are left to the current lease). Absent: matched
   * by the owner alone — the worker always sets it; only hand-made completions (tests, benchmarks) leave it out.
   */
  leaseUntil?: number;
  /** The attempt was sent as the circuit's probe. */
  probe?: boolean;
  next:
    | { status: 'pending'; nextAttemptAt: number }
    | { status: 'delivered' }
    | { status: 'dead'; reason: string };
}

/** A due delivery of a blocked endpoint, found by deliverySkipBlocked: what its `circuit_open` attempt records. */
export interface SkippedDelivery {
  delivery: DeliveryRecord;
  endpoint: { id: string; tenantId: string; url: string };
}

/** A circuit-open skip: an attempt completion recorded in the transaction that found it due, without a lease. */
export type SkipCompletion = Omit<AttemptCompletion, 'leaseOwner' | 'leaseUntil' | 'probe'>;

/** A completion as the store adapters write it: `leaseOwner` is null for a skip, which was never leased. */
export type RecordedCompletion = Omit<AttemptCompletion, 'leaseOwner'> & { leaseOwner: string | null };

export interface EndpointRuntimeView {
  endpointId: string;
  inflight: number;
  runtime: import('../domain/endpoint-runtime.ts').EndpointRuntime;
}

export interface AttemptWindowStats {
  attempts: number;
  successes: number;
  deadLetters: number;
  /** Sorted times (ms) of sent attempts in the window, at most the newest 1,000: the attempt log's three splits. */
  queueMs: number[];
  platformMs: number[];
  consumerMs: number[];
}

export interface BacklogStats {
  /** Undelivered: pending deliveries plus dead letters of the current failure streak. */
  pending: number;
  deadLetters: number;
  /** The oldest of both (what the drain estimate covers). */
  oldestCreatedAt: number | null;
  /** The oldest pending delivery alone (health's backlog age); null with none pending. */
  oldestPendingAt: number | null;
}

/**
 * `dead_letter`, `permanent_failure` and `digest`: failures (domain/dead-letter-notice.ts); `recovered`: the
 * endpoint left `failing` after one of those was sent (recoveredNoticeDue); `disabled`: disabled through the API;
 * `auto_disabled`: disabled after 72 h of failures.
 */
export type NotificationKind =
  | 'dead_letter'
  | 'permanent_failure'
  | 'digest'
  | 'recovered'
  | 'disabled'
  | 'auto_disabled';

export interface NotificationRecord {
  id: string;
  tenantId: string;
  endpointId: string | null;
  kind: NotificationKind;
  subject: string;
  body: string;
  /** Where it is mailed; null: no channel configured (listed only). */
  emailTo: string | null;
  status: 'pending' | 'sent' | 'logged';
  attempts: number;
  nextAttemptAt: number | null;
  lastError: string | null;
  createdAt: number;
  sentAt: number | null;
}

export interface AuditRecord {
  id: string;
  tenantId: string;
  /** `tenant:<key id>`, `operator`, or `system`. */
  actor: string;
  action: string;
  targetType: string;
  targetId: string;
  details: Record<string, unknown>;
  createdAt: number;
}

/**
 * Builds a change's audit record from what the change did. A store method given one writes the record in the
 * change's own transaction, so no change commits without its record and no record outlives a rolled-back change
 * (ADR-16). It is called only when the change is made (not for a refusal or an absent target); null records
 * nothing. It must not throw.
 */
export type AuditOf<R> = (result: R) => AuditRecord | null;

export type BacklogChoice = { kind: 'deliver' } | { kind: 'skip' } | { kind: 'resume_from'; at: number };

/** What a lease may take of each kind: first deliveries (and their retries) and replays (deliveryLease). */
export interface LeaseKinds {
  firstLimit?: number;
  replayLimit?: number;
  replaysOnly?: boolean;
}

export interface DeliveryIdFactory {
  delivery(): string;
  webhookId(): string;
}

export interface DeliveryStore {
  /**
   * Also puts the endpoint in its shared lane: scheme v1 over `sharedLanes` (HOOKRAIL_SHARED_LANES, default 8;
   * domain/lanes.ts). A count that differs from the maintenance role's is corrected by its next rebalance pass.
   */
  endpointCreate(p: {
    endpoint: EndpointRecord;
    secret: SecretRecord;
    sharedLanes?: number;
    audit?: AuditOf<void>;
  }): Promise<void>;
  /** `tenantId` null: any tenant (operator). Deleted endpoints are absent. */
  endpointGet(p: { id: string; tenantId: string | null }): Promise<EndpointRecord | null>;
  endpointList(p: ListParams & { tenantId: string | null }): Promise<Page<EndpointRecord>>;
  /**
   * Applies the patch. When `eventTypes` narrows, pending deliveries whose type no longer matches are cancelled in
   * the same transaction (an acknowledged unsubscribe binds, ADR-16). Null when absent.
   */
  endpointUpdate(p: {
    id: string;
    tenantId: string;
    patch: EndpointPatch;
    now: number;
    audit?: AuditOf<EndpointRecord>;
  }): Promise<EndpointRecord | null>;
  /** Deletes the endpoint and cancels its pending deliveries (kept as records). False when absent. */
  endpointDelete(p: { id: string; tenantId: string; now: number; audit?: AuditOf<void> }): Promise<boolean>;
  /**
   * Disable keeps the backlog pending but leases nothing for the endpoint; enable resumes. Disabling an enabled
   * endpoint also writes a `disabled` notification in the same transaction (none when it was disabled already).
   */
  endpointSetStatus(p: {
    id: string;
    tenantId: string;
    status: EndpointStatus;
    reason: string | null;
    now: number;
    /** The `disabled` notification's id; by default a new one at `now`. */
    ids?: { notification(): string };
    audit?: AuditOf<EndpointRecord>;
  }): Promise<EndpointRecord | null>;

  /**
   * Adds a secret. Every secret still active gets `active_until = min(current, previousActiveUntil)`, and all but
   * the newest of them is retired at once, so at most two are ever active. Returns that newest one as it stays
   * active for the overlap (null when none was active). 'not_found' when the endpoint is deleted (checked in the
   * same transaction, so a rotation racing a deletion never leaves a secret on a deleted endpoint).
   */
  secretRotate(p: {
    secret: SecretRecord;
    previousActiveUntil: number;
    now: number;
    audit?: AuditOf<SecretRecord | null>;
  }): Promise<SecretRecord | null | 'not_found'>;
  /** Active and not yet expired secrets (metadata and sealed values), newest first. */
  secretListActive(p: { endpointId: string; now: number }): Promise<SecretRecord[]>;
  /**
   * Retires a secret now; refuses (returns 'last') to retire the only active one. When the one retired was the only
   * active secret without an end (the newest of a rotation), the remaining one's end is lifted in the same
   * transaction: retiring the new secret undoes the rotation, and the endpoint never runs out of secrets.
   * 'not_found' also when the endpoint is deleted.
   */
  secretRetire(p: {
    id: string;
    endpointId: string;
    now: number;
    audit?: AuditOf<void>;
  }): Promise<'retired' | 'not_found' | 'last'>;

  /**
   * Fan-out, exactly once: takes committed events from the fan-out stream oldest first, reads each tenant's
   * enabled endpoints in the same transaction (strongly consistent, once per event), creates one delivery per
   * matching endpoint, and removes the events it took from the stream. It stops after `limit` events, or after the
   * event that brings the deliveries created to `deliveryLimit` (absent: no such limit), so one pass stays one
   * bounded transaction when events match many endpoints; the rest wait for the next pass. Returns how many events
   * it took and how many deliveries it created.
   */
  fanoutRun(p: {
    now: number;
    limit: number;
    deliveryLimit?: number;
    ids: DeliveryIdFactory;
  }): Promise<{ events: number; deliveries: number }>;

  /**
   * Leases due deliveries fairly across endpoints: endpoints with ready work are served least-recently-served
   * first, each within its in-flight cap (global, across processes), at most `perEndpoint` per endpoint per call.
   * With `lanes`, only endpoints whose current lane the binding serves (domain/lanes.ts); absent: every lane. Each
   * leased delivery records the lane it was leased under (what a later move counts as draining).
   *
   * Blocked endpoints — circuit not closed and its next probe not yet due (domain/circuit-breaker.ts blockedUntil)
   * — are passed over (deliverySkipBlocked records their due deliveries), and of an endpoint whose circuit is not
   * closed at most one delivery is leased (the probe, when due). So an open circuit costs healthy endpoints'
   * leases nothing.
   *
   * Replays (`replayedFrom` set) run on a budget of their own (ADR-10): of the `limit` leased, at most
   * `replayLimit` are replays and at most `firstLimit` are not (both default to `limit`; 0 leases none of that
   * kind). A delivery of a kind whose budget is spent stays queued, and so does whatever an ordering mode holds
   * behind it. Of one endpoint, at most the replays its replay pacing allows start (domain/replay-pacing.ts: 10 at
   * once after an idle spell, then one per 100 ms, whatever their due times); the schedule is written with the
   * queue row. With `replaysOnly`, only endpoints with a due replay that the pacing lets start are visited (a process
   * that runs the replay role alone would otherwise spend its calls on endpoints it may take nothing from).
   */
  deliveryLease(
    p: {
      owner: string;
      now: number;
      limit: number;
      perEndpoint: number;
      leaseMs: number;
      lanes?: LaneBinding;
    } & LeaseKinds,
  ): Promise<LeasedDelivery[]>;
  /**
   * The circuit-open pass (PRODUCT.md §5), in one transaction: up to `limit` due deliveries of blocked endpoints
   * (ordering modes hold as in a lease: the head of an `endpoint`-ordered queue, the oldest of each resource) are
   * recorded as the failed attempts `skip` makes of them (`circuit_open`, rescheduled or dead-lettered on the
   * retry schedule) and applied to the endpoints' runtimes as deliveryComplete applies attempts. Nothing is
   * leased: a skip sends nothing, so it takes no in-flight slot and needs no lease mark, and the transaction holds
   * no healthy endpoint's queue row. A blocked endpoint whose circuit in fact allows a probe now (a stored block
   * behind its runtime) is unblocked instead, for the next lease. `lanes` as for deliveryLease. Returns the
   * completions written.
   */
  deliverySkipBlocked(p: {
    now: number;
    limit: number;
    lanes?: LaneBinding;
    skip(d: SkippedDelivery): SkipCompletion;
    ids?: { notification(): string };
  }): Promise<SkipCompletion[]>;
  /** Appends the attempts and updates the deliveries and in-flight counts, in one transaction. */
  /**
   * Also applies each attempt to the endpoint's shared runtime (circuit, streak, health) and writes the notices it
   * calls for to the notification outbox, in the same transaction (health changes before any notice is sent): a
   * dead letter's or rejection's (dead-letter-notice.ts noticeDecision) and `recovered` (recoveredNoticeDue), whose
   * time is kept on the endpoint's queue row beside its runtime.
   */
  deliveryComplete(p: {
    completions: AttemptCompletion[];
    now: number;
    ids?: { notification(): string };
  }): Promise<void>;
  /** Returns deliveries whose lease expired (worker died) to the queue; returns how many. */
  deliveryExpireLeases(p: { now: number }): Promise<number>;
  deliveryGet(p: { id: string; tenantId: string | null }): Promise<DeliveryRecord | null>;
  deliveryList(
    p: ListParams & { endpointId: string; tenantId: string | null; status: DeliveryStatus | null },
  ): Promise<Page<DeliveryRecord>>;
  attemptList(p: { deliveryId: string; tenantId: string | null }): Promise<AttemptRecord[]>;
  attemptGet(p: { id: string; tenantId: string | null }): Promise<AttemptRecord | null>;
}
