/**
 * Failure handling and operations on the delivery plane (ADR-08/09/10/14/16): the shared per-endpoint runtime,
 * health statistics, backlog and re-enable, auto-disable, the notification outbox, replay and the audit trail.
 */

import type { EndpointSeriesSums } from '../domain/endpoint-series.ts';
import type { LaneMoveKind, LaneThresholds } from '../domain/lanes.ts';
import type { ReplayableStatus, SingleReplayRefusal } from '../domain/replay.ts';
import type { PruneBatch, RetentionCutoffs } from '../domain/retention.ts';
import type {
  AttemptWindowStats,
  AuditOf,
  AuditRecord,
  BacklogChoice,
  BacklogStats,
  DeliveryIdFactory,
  DeliveryRecord,
  DeliveryStatus,
  EndpointRecord,
  EndpointRuntimeView,
  NotificationRecord,
} from './delivery-store.ts';
import type { ListParams, NewEvent, Page } from './store.ts';

export interface BulkReplayResult {
  /** Matches found, oldest first, at most `max`. */
  found: number;
  /** Whether more match beyond those (the next request's). */
  more: boolean;
  created: number;
  /** Due times of the first and last replay created; null when none was. */
  firstDueAt: number | null;
  lastDueAt: number | null;
}

/** What re-enabling did (endpointEnable). */
export interface EnableResult {
  endpoint: EndpointRecord;
  requeued: number;
  skipped: number;
}

/** An endpoint's lane as the health API shows it. */
export interface LaneState {
  /** `shared:<n>` or `dedicated:<endpoint id>`; null until the first rebalance pass (endpoints older than lanes). */
  lane: string | null;
  since: number | null;
  previous: string | null;
  /** Deliveries still leased under a lane other than the current one: the drain window of the last move. */
  draining: number;
}

export interface LaneMove {
  endpointId: string;
  from: string | null;
  to: string;
  kind: LaneMoveKind;
}

/** One endpoint's queue row as queueRebuild found it and rebuilt it: each derived column as [stored, rebuilt]. */
export interface QueueRebuildResult {
  endpointId: string;
  /** The row was missing (recreated unless dry-run); its stored values are then null. */
  created: boolean;
  inflight: [number | null, number];
  nextDueAt: [number | null, number | null];
}

/** One delivery row deliveryReconstruct wrote (or, on a dry run, would write). */
export interface ReconstructedDelivery {
  /** `log`: a lost row recreated from its attempts; `new`: never attempted, created as fan-out would. */
  source: 'log' | 'new';
  deliveryId: string;
  endpointId: string;
  eventId: string;
  status: DeliveryStatus;
  statusReason: string | null;
  attempts: number;
  webhookId: string;
}

/** One batch of deliveryReconstruct. */
export interface DeliveryReconstructBatch {
  /** Events looked at. */
  events: number;
  /** The last event looked at, to continue after; null once the walk has reached the newest event. */
  after: string | null;
  deliveries: ReconstructedDelivery[];
}

export interface OperationsStore {
  /** The shared runtime record (circuit, streak, health, notice windows) and in-flight count. */
  endpointRuntime(p: { endpointId: string }): Promise<EndpointRuntimeView | null>;
  /** Attempt counts and latencies over `since` (sent attempts only; `circuit_open` excluded). */
  attemptStats(p: { endpointId: string; since: number }): Promise<AttemptWindowStats>;
  backlogStats(p: { endpointId: string }): Promise<BacklogStats>;
  /**
   * Raw per-bucket sums for an endpoint's time series (domain/endpoint-series.ts, which folds them and says what the
   * backlog derivation assumes), read in one statement, i.e. from one snapshot. Bucket k holds what was stamped in
   * [from + k·bucketMs, from + (k+1)·bucketMs); nothing stamped before `from` or at or after `until` is read. A
   * read with `withPending` (the open part of a window, app/endpoint-stats-cache.ts) passes `until` null, no upper
   * bound, so that its counts and `pendingNow` agree; a read without it (the settled part, kept per process) is
   * bounded on both sides and answers `pendingNow` 0. Per bucket:
   * - attempts sent (started_at; `circuit_open` excluded, as in attemptStats), how many delivered, and the sums of
   *   queue, platform and consumer times (consumer over the attempts that have one, with their count);
   * - dead letters: deliveries that became `dead` (updated_at);
   * - created: the endpoint's deliveries by created_at;
   * - settled: deliveries that left `pending` for `delivered`, `dead`, `cancelled` or `skipped` (updated_at). A
   *   delivery created before `from` and delivered after it is found through a `delivered` attempt of it started
   *   at or after `from − DELIVERED_LOOKBACK_MS` (and before `until`);
   * and, with `withPending`, the endpoint's deliveries in status `pending` now (leased or not). Reads through
   * attempts_endpoint and deliveries_endpoint (both over the ids minted in [from, until)), deliveries_dead and
   * deliveries_withdrawn (updated_at in [from, until)), and deliveries_head: the cost grows with the traffic
   * between `from` and `until`, not with the endpoint's history.
   */
  endpointSeries(p: {
    endpointId: string;
    from: number;
    /** Exclusive; null: no upper bound. */
    until: number | null;
    bucketMs: number;
    withPending: boolean;
  }): Promise<EndpointSeriesSums>;
  /**
   * Re-enables a disabled endpoint with the owner's explicit backlog choice (ADR-14), in one transaction:
   * `deliver` — pending deliveries become due now and the current streak's dead letters are re-queued as new
   * deliveries with their original webhook-id, those a bulk replay would pick (not replayed before, of an event type
   * the endpoint still subscribes to); `skip` — pending deliveries become `skipped`; `resume_from` — events
   * accepted before `at` are skipped, the rest delivered. Starts the ramp. Null when absent or not disabled.
   */
  endpointEnable(p: {
    id: string;
    tenantId: string;
    choice: BacklogChoice;
    now: number;
    ids: DeliveryIdFactory;
    audit?: AuditOf<EnableResult>;
  }): Promise<EnableResult | null>;
  /**
   * Disables every enabled endpoint whose failure streak has lasted `afterMs` with no success (ADR-14), writing an
   * audit record and an `auto_disabled` notification for each. Returns the disabled endpoints.
   */
  endpointAutoDisable(p: {
    now: number;
    afterMs: number;
    ids: { audit(): string; notification(): string };
  }): Promise<EndpointRecord[]>;
  /** Writes digests whose window has ended (see dead-letter-notice.ts). Returns how many. */
  notificationDigestRun(p: { now: number; ids: { notification(): string } }): Promise<number>;
  /** Claims due outbox notifications (pushing their next attempt out by `leaseMs`), oldest first. */
  notificationClaim(p: { now: number; limit: number; leaseMs: number }): Promise<NotificationRecord[]>;
  notificationMark(p: {
    id: string;
    now: number;
    result: { kind: 'sent' } | { kind: 'retry'; at: number; error: string } | { kind: 'logged' };
  }): Promise<void>;
  notificationList(p: ListParams & { tenantId: string | null }): Promise<Page<NotificationRecord>>;
  tenantNotificationEmail(p: { tenantId: string }): Promise<string | null>;
  tenantSetNotificationEmail(p: {
    tenantId: string;
    email: string | null;
    now: number;
    audit?: AuditOf<void>;
  }): Promise<void>;

  /**
   * A new delivery of the same event to the same endpoint with the original webhook-id (ADR-10), due at
   * domain/replay.ts replayStart: now, or one interval after the endpoint's latest pending replay, so single and
   * bulk replays share the endpoint's `ratePerSecond`. Refused, changing nothing, as domain/replay.ts
   * singleReplayRefusal says: 'cancelled' (an acknowledged unsubscribe binds) or 'unsubscribed' (the endpoint no longer
   * subscribes to the event's type).
   */
  deliveryReplay(p: {
    id: string;
    tenantId: string;
    now: number;
    ratePerSecond: number;
    ids: DeliveryIdFactory;
    audit?: AuditOf<DeliveryRecord>;
  }): Promise<DeliveryRecord | 'not_found' | 'endpoint_gone' | SingleReplayRefusal>;

  /**
   * Bulk replay of one endpoint (POST /v1/endpoints/:id/replay; domain/replay.ts). Matches: the endpoint's
   * deliveries with a status in `statuses`, created in [since, until), whose event type the endpoint still
   * subscribes to, and not replayed before (no delivery names them as `replayed_from`). The oldest `max` are found
   * (by delivery id, which is creation order), reading the endpoint's deliveries in pages and stopping once one
   * more is seen (the rows a page passes over for their status still cost their read). When more than
   * `confirmAbove` are found (null: no limit) nothing is created; otherwise, in one transaction, a replay of each,
   * the k-th due at replayDueAt(replayStart(now, the latest due time of the endpoint's pending replays), k).
   * 'not_found': the tenant has no such live endpoint.
   */
  deliveryReplayBulk(p: {
    endpointId: string;
    tenantId: string;
    statuses: ReplayableStatus[];
    since: number | null;
    until: number;
    now: number;
    ratePerSecond: number;
    confirmAbove: number | null;
    max: number;
    ids: DeliveryIdFactory;
    /** Called only when replays were created. */
    audit?: AuditOf<BulkReplayResult>;
  }): Promise<BulkReplayResult | 'not_found'>;

  /**
   * A test event for one endpoint (POST /v1/endpoints/:id/test), in one transaction: the event, recorded as
   * addressed to that endpoint (`events.endpoint_id`), and its one delivery, due now. Fan-out never takes such an
   * event, so no other endpoint receives it, whatever it subscribes to; the endpoint itself gets it whatever its
   * own subscriptions say. 'not_found': the tenant has no such live endpoint; 'disabled': it is disabled. Neither
   * writes anything.
   */
  endpointTestEvent(p: {
    endpointId: string;
    tenantId: string;
    event: NewEvent;
    now: number;
    ids: DeliveryIdFactory;
    audit?: AuditOf<DeliveryRecord>;
  }): Promise<DeliveryRecord | 'not_found' | 'disabled'>;

  /**
   * One batch of the retention pass (domain/retention.ts). It looks at up to `limit` events accepted before
   * `cutoffs.events`, oldest first after the event `after` (null: from the oldest), and deletes those that have
   * been fanned out and of whose deliveries none is pending or a dead letter that died at or after
   * `cutoffs.deadLetters` — each with all its deliveries. It also deletes up to `limit` attempts that started before
   * `cutoffs.attempts` and audit records made before `cutoffs.audit`, oldest first. Never races a replay: a delivery
   * being replayed is not deleted under it. The events it deletes hold at most `deliveryLimit` deliveries in all
   * (the first whatever its count: domain/retention.ts retentionWalk); stopping early, it answers the last
   * event it took as `after`.
   */
  retentionPrune(p: {
    cutoffs: RetentionCutoffs;
    limit: number;
    deliveryLimit: number;
    after: string | null;
  }): Promise<PruneBatch>;

  /** A record on its own; changes made through this port write theirs in their transaction (AuditOf). */
  auditAppend(p: { record: AuditRecord }): Promise<void>;
  /** Oldest first when `ascending` (exports), newest first otherwise. */
  auditList(p: ListParams & { tenantId: string | null; ascending?: boolean }): Promise<Page<AuditRecord>>;

  /** For metrics: pending deliveries across all endpoints, and enabled endpoints whose circuit is not closed. */
  queueStats(): Promise<{ pending: number; circuitsOpen: number }>;

  /**
   * One pass of the lane control loop (ADR-03, domain/lanes.ts decideLane): promotes, demotes and re-hashes
   * (after a change of `sharedLanes`) live endpoints, assigns a lane to those that have none, and returns the moves
   * made. Safe with several maintenance processes at once: each move is made by one pass only (PostgreSQL: a
   * transaction-scoped advisory lock; a pass that does not get it makes no move). A move rewrites the queue row's
   * lane under its lock and nothing else; no move is made while the previous one still drains.
   */
  laneRebalance(p: { now: number; sharedLanes: number; thresholds: LaneThresholds }): Promise<LaneMove[]>;
  /** Null when the endpoint does not exist. */
  endpointLane(p: { endpointId: string }): Promise<LaneState | null>;
  /**
   * For metrics: live endpoints in dedicated lanes, and pending deliveries per lane with every dedicated lane
   * counted as `dedicated` and unassigned endpoints as `unassigned` (bounded label values).
   */
  laneStats(): Promise<{ dedicatedEndpoints: number; pendingByLane: Record<string, number> }>;

  /**
   * Every endpoint id, deleted endpoints included, ascending: at most `limit` after `after` (null: from the first),
   * and how many endpoints there are in all (for progress).
   */
  endpointIdList(p: { after: string | null; limit: number }): Promise<{ ids: string[]; total: number }>;
  /**
   * An operator's repair (`hookrail queue rebuild`): recomputes the derived columns of one endpoint's queue row
   * from its deliveries, in one short transaction holding the row as leasing and completion do (safe while the
   * delivery plane runs), and writes them back where they differ. Null when the endpoint does not exist.
   * - `inflight` is the number of the endpoint's deliveries with a lease owner, whatever their status: the lease
   *   adds one per delivery it marks leased (a `circuit_open` one too), and completion and lease expiry subtract
   *   one per lease they clear. A delivery cancelled while in flight (unsubscribe, endpoint or tenant deletion)
   *   keeps its lease, and its slot, until its attempt completes or the lease expires, so deleted endpoints have
   *   rows worth rebuilding too. A skip of the circuit-open pass is never leased and holds no slot.
   * - `next_due_at` is the earliest next_attempt_at of its unleased pending deliveries while the endpoint is enabled
   *   and not deleted, else null: the recompute the delivery plane itself runs.
   * A missing row is recreated in the endpoint's shared lane under `sharedLanes` (since `now`), as endpointCreate
   * places it, with a fresh runtime record (closed circuit, no health history: the old one is lost with the row).
   * With `dryRun` nothing is written (and no row lock taken: the stored and rebuilt values come from one snapshot).
   */
  queueRebuild(p: {
    endpointId: string;
    dryRun: boolean;
    sharedLanes: number;
    now: number;
  }): Promise<QueueRebuildResult | null>;

  /**
   * One batch of an operator's repair (`hookrail queue rebuild --deliveries`; ADR-15): lost delivery rows rebuilt
   * from the accepted events and the attempt log, as domain/delivery-reconstruct.ts planReconstruction decides. It
   * looks at up to `limit` events accepted at or after `since`, in id order after the event `after` (null: from the
   * first), and for those fan-out has taken (test events excepted) it recreates each delivery the log names
   * (attempts.event_id) whose row is missing, under its own id and webhook-id in the state its attempts prove, and
   * gives every live endpoint of the event's tenant that subscribes to its type now, was created before it was
   * accepted, and has neither a row nor an attempt for it a new pending delivery due now (ids from `ids`, as fan-out
   * mints them). An existing delivery row is never changed. The attempts of the batch are read as one range of event
   * ids (attempts_event).
   *
   * One short transaction per batch, safe while Hookrail runs: it holds what fan-out holds (SQLite: the write lock;
   * PostgreSQL: the events' tenant gates shared, so an unsubscribe, deletion or retention pass waits for it or is
   * seen by it, plus a lock of its own that serialises concurrent reconstructions), and the due times of the
   * endpoints that got pending deliveries are recomputed in it. With `dryRun` nothing is written: the answer says
   * what would be (new ids included, which a real run mints afresh).
   *
   * Limits (docs/cli.md): subscriptions are read as they are now; a delivery skipped or cancelled before any
   * attempt left no trace and comes back pending; a replay comes back as a plain delivery; attempts recorded before
   * SQLite migration 0018 / PostgreSQL 0017 name no event and tie nothing back; attempts pruned by retention are
   * gone, so callers keep `since` within the attempt log's retention.
   */
  /**
   * Since when every attempt names its event (ms): when SQLite migration 0018 / PostgreSQL 0017 was applied. An
   * event accepted earlier may have attempts that name nothing, so deliveryReconstruct's callers start at or after it.
   */
  deliveryReconstructFloor(): Promise<number>;
  deliveryReconstruct(p: {
    after: string | null;
    since: number;
    limit: number;
    now: number;
    dryRun: boolean;
    ids: DeliveryIdFactory;
  }): Promise<DeliveryReconstructBatch>;
}
