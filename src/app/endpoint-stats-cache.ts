/**
 * The settled part of endpoint time series, kept per process (GET /v1/endpoints/:id/stats). Reading a whole window
 * on every request cost ~1.7 s for ~875k deliveries in a 7-day window on SQLite (synchronous: the whole API waits)
 * and ~2.5 s for 1.75M on PostgreSQL (close to the pool's 3 s statement timeout). But a bucket's sums stop changing
 * once every write that can land in it has landed (domain/endpoint-series.ts, seriesSettleMs), so a request splits
 * its range at seriesSettledUntil — the last bucket boundary at or before now − seriesSettleMs:
 * - [from, settledUntil): kept here per endpoint and window; a request reads only the settled buckets the entry
 *   does not hold yet (normally none, or the one bucket that settled since) and drops those that left the window;
 * - [settledUntil, …): read on every request with the pending count, in one statement (one snapshot);
 * and joinSeriesSums adds them up (the sums are additive per bucket, the parts' buckets disjoint). The answer is
 * the one a single read of the whole range gives (src/api/endpoint-stats-cache.test.ts checks it on both stores).
 *
 * A new entry reads its settled part in pieces of at most READ_PIECE_MS (six hours: one bucket of the 7-day window,
 * six of the 24-hour one), with a turn of the event loop between them, so that on SQLite (synchronous) no request
 * stops intake for the whole window (measured with 500k deliveries in 7 days, on a loaded machine: 1.5–1.9 s for
 * one read of the window, at most ~100 ms per piece). A bucket, once read, is kept until it leaves the window or the entry is REREAD_AFTER_MS old; then the
 * window is read again, which also picks up whatever landed later than the settle time allows (an attempt recorded
 * after a long store outage) or was deleted by retention meanwhile — each is off until then. At most `maxEntries`
 * entries (one per endpoint and window), the least recently used dropped first. Requests for one entry take turns,
 * so concurrent misses share one read. Nothing is shared between processes: each reads each window once.
 */
import { DEFAULT_LEASE_MS } from '../config/config.ts';
import {
  type EndpointSeriesSums,
  joinSeriesSums,
  type SeriesRange,
  seriesSettledUntil,
  seriesSettleMs,
  sliceSeriesSums,
} from '../domain/endpoint-series.ts';
import type { OperationsStore } from '../ports/operations-store.ts';

export const STATS_CACHE_ENTRIES = 1_000;

/**
 * The lease the settle time allows for is this process's HOOKRAIL_LEASE_MS (the composition root passes it; its
 * default otherwise). On PostgreSQL the delivery processes are others, whose setting may differ: a longer lease
 * than this matters in one case only — a delivery cancelled while its attempt was in flight, whose worker then
 * died, is stamped again at the lease's expiry — and then one bucket's backlog is off by that delivery until the
 * window is read again.
 */
type SeriesReader = Pick<OperationsStore, 'endpointSeries'>;

/** The longest span one read of a new entry covers (at least one bucket). */
export const READ_PIECE_MS = 6 * 3_600_000;
/** How long an entry's buckets are kept before the window is read again. */
export const REREAD_AFTER_MS = 24 * 3_600_000;

interface Entry {
  /** The settled buckets held: [from, until), counted from `from`. */
  from: number;
  until: number;
  sums: EndpointSeriesSums;
  /** When (the requests' `now`) the entry was first read. */
  readAt: number;
  /** The read under way, which the next request for this entry waits for. */
  turn: Promise<unknown>;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class EndpointStatsCache {
  readonly settleMs: number;
  private readonly maxEntries: number;
  private readonly entries = new Map<string, Entry>();

  constructor(opts: { leaseMs?: number; maxEntries?: number } = {}) {
    this.settleMs = seriesSettleMs(opts.leaseMs ?? DEFAULT_LEASE_MS);
    this.maxEntries = opts.maxEntries ?? STATS_CACHE_ENTRIES;
  }

  /** The range's sums, as one store.endpointSeries read of [from, now] with the pending count would answer. */
  async sums(store: SeriesReader, endpointId: string, range: SeriesRange): Promise<EndpointSeriesSums> {
    const settledUntil = seriesSettledUntil(range, this.settleMs);
    const [settled, open] = await Promise.all([
      this.settled(store, endpointId, range, settledUntil),
      store.endpointSeries({
        endpointId,
        from: settledUntil,
        until: null,
        bucketMs: range.bucketMs,
        withPending: true,
      }),
    ]);
    return joinSeriesSums(range, settled, settledUntil, open);
  }

  /** Entries held (tests). */
  get size(): number {
    return this.entries.size;
  }

  private settled(
    store: SeriesReader,
    endpointId: string,
    range: SeriesRange,
    settledUntil: number,
  ): Promise<EndpointSeriesSums> {
    if (settledUntil <= range.from) return Promise.resolve(NOTHING);
    const key = `${endpointId} ${range.window}`;
    let entry = this.entries.get(key);
    // Most recently used last: Map keeps insertion order.
    if (entry) this.entries.delete(key);
    else
      entry = {
        from: range.from,
        until: range.from,
        sums: NOTHING,
        readAt: range.now,
        turn: Promise.resolve(),
      };
    this.entries.set(key, entry);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    const held = entry;
    const result = held.turn.then(() => this.extend(store, endpointId, range, settledUntil, held));
    // A failed read fails its request only; the entry keeps what was read before it.
    held.turn = result.catch(() => undefined);
    return result;
  }

  /** Brings the entry to [range.from, settledUntil) and answers that part of it. */
  private async extend(
    store: SeriesReader,
    endpointId: string,
    range: SeriesRange,
    settledUntil: number,
    e: Entry,
  ): Promise<EndpointSeriesSums> {
    const { bucketMs } = range;
    // A gap since the last request, a clock that went back, or an old entry: start again.
    if (e.until < range.from || e.from > range.from || range.now - e.readAt >= REREAD_AFTER_MS) {
      Object.assign(e, { from: range.from, until: range.from, sums: NOTHING, readAt: range.now });
    }
    if (e.from < range.from) {
      e.sums = sliceSeriesSums(e.sums, (range.from - e.from) / bucketMs, Number.POSITIVE_INFINITY);
      e.from = range.from;
    }
    const piece = Math.max(bucketMs, Math.floor(READ_PIECE_MS / bucketMs) * bucketMs);
    while (e.until < settledUntil) {
      const until = Math.min(settledUntil, e.until + piece);
      const part = await store.endpointSeries({
        endpointId,
        from: e.until,
        until,
        bucketMs,
        withPending: false,
      });
      e.sums = joinSeriesSums(range, e.sums, e.until, part);
      e.until = until;
      if (e.until < settledUntil) await nextTurn();
    }
    // A later request may have read further: answer only up to this one's settled end.
    return e.until === settledUntil
      ? e.sums
      : sliceSeriesSums(e.sums, 0, (settledUntil - range.from) / bucketMs);
  }
}

const NOTHING: EndpointSeriesSums = {
  attempts: [],
  deadLetters: [],
  created: [],
  settled: [],
  pendingNow: 0,
};
