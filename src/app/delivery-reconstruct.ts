/**
 * `hookrail queue rebuild --deliveries` (ADR-15): lost delivery rows rebuilt from the accepted events and the
 * attempt log, one batch of events per store transaction (OperationsStore.deliveryReconstruct says what is rebuilt,
 * how, and why it is safe while Hookrail runs; domain/delivery-reconstruct.ts decides). Events are walked in id
 * (acceptance) order from `since`; one accepted during the walk is looked at if the walk reaches it, and is left to
 * fan-out if fan-out has not taken it yet.
 *
 * `since` never reaches back past the attempt log's retention (domain/retention.ts), nor past the time attempts
 * began to name their event (the migration that added it): attempts older than the one may have been pruned, and
 * those older than the other tie nothing back, so a delivery of such an event would come back as never attempted —
 * sent again, under a new webhook-id, though it may have been delivered.
 */
import { newId } from '../domain/ids.ts';
import { type RetentionDays, retentionCutoffs } from '../domain/retention.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { DeliveryStatus } from '../ports/delivery-store.ts';
import type { OperationsStore } from '../ports/operations-store.ts';

/** Events per store transaction. */
export const RECONSTRUCT_BATCH = 200;

/** What was rebuilt for one endpoint. */
export interface EndpointReconstruction {
  endpointId: string;
  /** Lost rows recreated from their attempts, by the status the log proved (or, where pending, their standing). */
  recreated: Partial<Record<DeliveryStatus, number>>;
  /** Never attempted: new pending deliveries with a new webhook-id. */
  created: number;
}

export interface DeliveryReconstructReport {
  dryRun: boolean;
  /** The acceptance time the walk started at. */
  since: number;
  /**
   * The `since` asked for was before the attempt log's retention or before attempts named their event, so the walk
   * started at the later of the two instead.
   */
  sinceRaised: boolean;
  /** Events looked at. */
  events: number;
  recreated: number;
  created: number;
  /** Per endpoint that got any, in endpoint id order. */
  endpoints: EndpointReconstruction[];
}

export async function reconstructDeliveries(
  deps: {
    store: Pick<OperationsStore, 'deliveryReconstruct' | 'deliveryReconstructFloor'>;
    clock: Clock;
    random: Random;
  },
  o: {
    dryRun: boolean;
    /** Events accepted at or after this; null: as far back as the attempt log goes. */
    since: number | null;
    retention: RetentionDays;
    batch?: number;
    /** After each batch, with the events looked at so far. */
    onProgress?: (events: number) => void;
  },
): Promise<DeliveryReconstructReport> {
  const floor = Math.max(
    retentionCutoffs(deps.clock.now(), o.retention).attempts,
    await deps.store.deliveryReconstructFloor(),
  );
  const since = Math.max(o.since ?? floor, floor);
  const report: DeliveryReconstructReport = {
    dryRun: o.dryRun,
    since,
    sinceRaised: o.since !== null && o.since < floor,
    events: 0,
    recreated: 0,
    created: 0,
    endpoints: [],
  };
  const byEndpoint = new Map<string, EndpointReconstruction>();
  for (let after: string | null = null; ; ) {
    const now = deps.clock.now();
    const batch = await deps.store.deliveryReconstruct({
      after,
      since,
      limit: o.batch ?? RECONSTRUCT_BATCH,
      now,
      dryRun: o.dryRun,
      ids: {
        delivery: () => newId('delivery', now, deps.random.bytes(10)),
        webhookId: () => newId('message', now, deps.random.bytes(10)),
      },
    });
    report.events += batch.events;
    for (const d of batch.deliveries) {
      let e = byEndpoint.get(d.endpointId);
      if (!e) {
        e = { endpointId: d.endpointId, recreated: {}, created: 0 };
        byEndpoint.set(d.endpointId, e);
      }
      if (d.source === 'new') {
        e.created++;
        report.created++;
      } else {
        e.recreated[d.status] = (e.recreated[d.status] ?? 0) + 1;
        report.recreated++;
      }
    }
    o.onProgress?.(report.events);
    if (batch.after === null) break;
    after = batch.after;
  }
  report.endpoints = [...byEndpoint.values()].sort((a, b) =>
    a.endpointId < b.endpointId ? -1 : a.endpointId > b.endpointId ? 1 : 0,
  );
  return report;
}
