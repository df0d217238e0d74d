/**
 * The settled part of endpoint time series, kept per process (GET /v1/endpoints/:id/stats). Reading a whole window
 * on every request cost ~1.7 s for ~875k deliveries in a 7-day window on SQLite (synchronous: the whole API waits)
 * and ~2.5 s for 1.75M on PostgreSQL (close to the pool's 3 s statement timeout). But a bucket's sums stop changing
 * once every write that can land in it has landed (domain/endpoint-series.ts, seriesSettleMs), so a request splits
 * its range at seriesSettledUntil — the last bucket boundary at or before now − seriesSettleMs:
 * - [from, settledUntil): read once per settled period (bounded on both sides, no pending count) and kept here;
 * - [settledUntil, …): read on every request with the pending count, in one statement (one snapshot);
 * and joinSeriesSums adds them up (the sums are additive per bucket, the parts' buckets disjoint). The answer is
 * the one a single read of the whole range gives (src/api/endpoint-stats-cache.test.ts checks it on both stores).
 *
 * An entry is valid for one endpoint, window, `from` and settledUntil: the next bucket boundary moves settledUntil
 * and the first request after it reads the window again, which also picks up whatever landed later than the
 * settle time allows (an attempt recorded after a long store outage) or was deleted by retention meanwhile — each
 * is off for at most one bucket (5 min, 1 h, 6 h). One entry per endpoint and window (a newer period replaces the
 * older), at most `maxEntries` of them, the least recently used dropped first. Concurrent requests that miss share
 * one read. Nothing is shared between processes: each reads the window once per period.
 */
import { DEFAULT_LEASE_MS } from '../config/config.ts';
import {
  type EndpointSeriesSums,
  joinSeriesSums,
  type SeriesRange,
  seriesSettledUntil,
  seriesSettleMs,
} from '../domain/endpoint-series.ts';
import type { OperationsStore } from '../ports/operations-store.ts';

export const STATS_CACHE_ENTRIES = 1_000;

/**
 * The lease the settle time allows for is this process's HOOKRAIL_LEASE_MS (the composition root passes it; its
 * default otherwise). On PostgreSQL the delivery processes are others, whose setting may differ: a longer lease
 * than this matters in one case only — a delivery cancelled while its attempt was in flight, whose worker then
 * died, is stamped again at the lease's expiry — and then one bucket's backlog is off by that delivery until the
 * next settled period.
 */
type SeriesReader = Pick<OperationsStore, 'endpointSeries'>;

interface Entry {
  from: number;
  settledUntil: number;
  sums: Promise<EndpointSeriesSums>;
}

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
    const hit = this.entries.get(key);
    if (hit && hit.from === range.from && hit.settledUntil === settledUntil) {
      // Most recently used last: Map keeps insertion order.
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit.sums;
    }
    const entry: Entry = {
      from: range.from,
      settledUntil,
      sums: store.endpointSeries({
        endpointId,
        from: range.from,
        until: settledUntil,
        bucketMs: range.bucketMs,
        withPending: false,
      }),
    };
    // A failed read is not kept: the next request tries again.
    entry.sums.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    this.entries.delete(key);
    this.entries.set(key, entry);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return entry.sums;
  }
}

const NOTHING: EndpointSeriesSums = {
  attempts: [],
  deadLetters: [],
  created: [],
  settled: [],
  pendingNow: 0,
};
