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
  async waitFor(distinct: number, what: string, log: Log): Promise<ReceiverStats> {
    let last = await this.stats();
    let lastMove = Date.now();
    let lastLog = Date.now();
    let logged = last.distinctWebhookIds;
    while (last.distinctWebhookIds < distinct) {
      await new Promise((r) => setTimeout(r, 100));
      const s = await this.stats();
      if (s.distinctWebhookIds !== last.distinctWebhookIds) lastMove = Date.now();
      last = s;
      if (Date.now() - lastLog >= 5000) {
        const rate = ((s.distinctWebhookIds - logged) * 1000) / (Date.now() - lastLog);
        log(
          `${what}: ${s.distinctWebhookIds}/${distinct} delivered (${Math.round(rate)}/s over the last 5 s)`,
        );
        lastLog = Date.now();
        logged = s.distinctWebhookIds;
      }
      if (Date.now() - lastMove > STALL_MS) {
        throw new Error(
          `${what}: stalled at ${s.distinctWebhookIds}/${distinct} deliveries for ${STALL_MS / 1000} s`,
        );
      }
    }
    return last;
  }

  /** Until `n` distinct deliveries arrived on paths that are not held; fails when the count stops moving. */
  async waitForUnheld(n: number, what: string): Promise<void> {
    let last = -1;
    let lastMove = Date.now();
    for (;;) {
      const s = await this.stats();
      const got = s.distinctWebhookIds - s.heldWebhookIds;
      if (got >= n) return;
      if (got !== last) {
        last = got;
        lastMove = Date.now();
      }
      if (Date.now() - lastMove > STALL_MS) {
        throw new Error(`${what}: stalled at ${got}/${n} healthy deliveries for ${STALL_MS / 1000} s`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
