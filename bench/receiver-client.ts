/**
 * The benchmark side of bench/delivery-receiver.ts (its control port: stats, arrivals, reset, waiting for
 * deliveries), and a loopback port where nothing listens, for endpoints that refuse connections.
 */
import { createServer } from 'node:net';
import type { ReceiverStats } from './delivery-receiver.ts';
import type { Log } from './support.ts';

/** A wait fails when the count has not moved for this long while some deliveries are still missing. */
const STALL_MS = 60_000;

/** A loopback port where nothing listens: connections to it are refused at once. */
export async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

export class ReceiverClient {
  constructor(readonly control: string) {}

  async stats(): Promise<ReceiverStats> {
    return (await fetch(`${this.control}/stats`)).json() as Promise<ReceiverStats>;
  }

  async arrivals(): Promise<Map<string, number>> {
    return new Map((await (await fetch(`${this.control}/arrivals`)).json()) as Array<[string, number]>);
  }

  async reset(): Promise<void> {
    await (await fetch(`${this.control}/reset`, { method: 'POST' })).arrayBuffer();
  }

  /** Until `distinct` webhook-ids arrived, logging the rate every 5 s; fails when the count stops moving. */
  waitFor(distinct: number, what: string, log: Log): Promise<ReceiverStats> {
    return this.waitUntil((s) => s.distinctWebhookIds, distinct, what, 'deliveries', log);
  }

  /** Until `n` distinct deliveries arrived on paths that are not held; fails when the count stops moving. */
  async waitForUnheld(n: number, what: string): Promise<void> {
    await this.waitUntil((s) => s.distinctWebhookIds - s.heldWebhookIds, n, what, 'healthy deliveries', null);
  }

  /** Polls the stats until `count` reaches `n`; fails when it has not moved for STALL_MS. */
  private async waitUntil(
    count: (s: ReceiverStats) => number,
    n: number,
    what: string,
    noun: string,
    log: Log | null,
  ): Promise<ReceiverStats> {
    let s = await this.stats();
    let last = count(s);
    let lastMove = Date.now();
    let lastLog = Date.now();
    let logged = last;
    while (count(s) < n) {
      await new Promise((r) => setTimeout(r, 100));
      s = await this.stats();
      const got = count(s);
      if (got !== last) {
        last = got;
        lastMove = Date.now();
      }
      if (log && Date.now() - lastLog >= 5000) {
        const rate = ((got - logged) * 1000) / (Date.now() - lastLog);
        log(`${what}: ${got}/${n} delivered (${Math.round(rate)}/s over the last 5 s)`);
        lastLog = Date.now();
        logged = got;
      }
      if (Date.now() - lastMove > STALL_MS) {
        throw new Error(`${what}: stalled at ${got}/${n} ${noun} for ${STALL_MS / 1000} s`);
      }
    }
    return s;
  }
}
