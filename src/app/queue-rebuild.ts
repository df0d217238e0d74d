/**
 * `hookrail queue rebuild` (PRODUCT.md §9): every endpoint's queue row recomputed from its deliveries, one endpoint
 * per store transaction (OperationsStore.queueRebuild says what is recomputed and why it is safe while Hookrail
 * runs). Endpoints are walked in id order, deleted ones too; one created during the walk is either visited or was
 * created with a correct row.
 */
import type { Clock } from '../ports/clock.ts';
import type { OperationsStore, QueueRebuildResult } from '../ports/operations-store.ts';

/** Endpoint ids read per store call. */
const PAGE = 500;
/** Changed rows listed in the report; the rest are only counted (a restore can touch every endpoint). */
export const LISTED_CHANGES = 100;

export interface QueueRebuildReport {
  dryRun: boolean;
  /** Endpoints visited. */
  endpoints: number;
  /** Rows that differed (or were missing): rewritten, or with `dryRun` only found. */
  fixed: number;
  /** The first LISTED_CHANGES of them, in endpoint id order. */
  changes: QueueRebuildResult[];
}

export async function rebuildQueues(
  deps: { store: Pick<OperationsStore, 'endpointIdList' | 'queueRebuild'>; clock: Clock },
  o: {
    dryRun: boolean;
    sharedLanes: number;
    /** After each endpoint (the caller throttles any drawing). */
    onProgress?: (done: number, total: number) => void;
  },
): Promise<QueueRebuildReport> {
  const report: QueueRebuildReport = { dryRun: o.dryRun, endpoints: 0, fixed: 0, changes: [] };
  for (let after: string | null = null; ; ) {
    const page = await deps.store.endpointIdList({ after, limit: PAGE });
    for (const endpointId of page.ids) {
      const r = await deps.store.queueRebuild({
        endpointId,
        dryRun: o.dryRun,
        sharedLanes: o.sharedLanes,
        now: deps.clock.now(),
      });
      report.endpoints++;
      if (r && isChange(r)) {
        report.fixed++;
        if (report.changes.length < LISTED_CHANGES) report.changes.push(r);
      }
      // Endpoints created meanwhile raise the total; never show more done than there are.
      o.onProgress?.(report.endpoints, Math.max(page.total, report.endpoints));
    }
    if (page.ids.length < PAGE) return report;
    after = page.ids[page.ids.length - 1]!;
  }
}

export const isChange = (r: QueueRebuildResult): boolean =>
  r.created || r.inflight[0] !== r.inflight[1] || r.nextDueAt[0] !== r.nextDueAt[1];
