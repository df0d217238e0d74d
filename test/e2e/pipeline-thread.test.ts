/**
 * The pipeline thread (src/bootstrap/pipeline-thread.ts) in a real `hookrail start`, on SQLite and PostgreSQL:
 * events taken by the API thread reach the receiver through the pipeline thread, its attempts show on the API
 * thread's /metrics, a SIGTERM lets in-flight attempts finish and be recorded, and the same runs with the thread
 * switched off.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  createEndpoint,
  createTenant,
  type LeaseState,
  postgresLeaseState,
  printWorkerOutputOnFailure,
  sqliteLeaseState,
  startHookrailProcess,
} from '../support/delivery-e2e.ts';
import { createChildSchema, useHookrailProcesses } from '../support/hookrail-process.ts';
import { http } from '../support/intake-load.ts';
import { postgresUrl } from '../support/postgres.ts';
import { Receiver } from '../support/receiver.ts';
import { waitFor } from '../support/wait.ts';

const ADMIN_TOKEN = `hka_${'p'.repeat(43)}`;
const EVENTS = 60;

useHookrailProcesses();
printWorkerOutputOnFailure();

describe.each([
  ['SQLite', 'pipeline thread', 'true'],
  ['SQLite', 'one thread', 'false'],
  ['PostgreSQL', 'pipeline thread', 'true'],
])('%s, %s', (store, _name, threaded) => {
  it('delivers every event, counts its attempts on /metrics, and stops cleanly', {
    timeout: 60_000,
  }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hookrail-pipeline-'));
    const schema = store === 'PostgreSQL' ? await createChildSchema(postgresUrl(), 'pipeline') : null;
    const env = {
      HOOKRAIL_DATA_DIR: dataDir,
      HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
      HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8',
      HOOKRAIL_PIPELINE_THREAD: threaded,
      ...(schema ? { DATABASE_URL: schema.url } : {}),
    };
    const leaseState = (): Promise<LeaseState> =>
      schema ? postgresLeaseState(schema.url) : Promise.resolve(sqliteLeaseState(dataDir));
    const receiver = await Receiver.start();
    // Slow answers, so that attempts are in flight when SIGTERM comes.
    receiver.answer(() => ({ status: 204, delayMs: 150 }));
    try {
      const p = await startHookrailProcess({
        env,
      });
      expect(p.stdout.includes('; pipeline thread)')).toBe(threaded === 'true');
      const base = p.url as string;
      const { tenantId, tenantKey, producerKey } = await createTenant(base, ADMIN_TOKEN);
      // One delivery in flight per endpoint: with 150 ms answers, at most ~13 deliveries a second for the two, far
      // slower than intake takes the 60 events. So when half have arrived, the rest are still queued (or in
      // flight) and the restarted process has work left to send; with the default cap of 10 delivery could keep
      // up with intake and leave nothing.
      await createEndpoint(base, tenantKey, receiver.url('/a'), { max_concurrency: 1 });
      await createEndpoint(base, tenantKey, receiver.url('/b'), { max_concurrency: 1 });

      const ids: string[] = [];
      for (let i = 0; i < EVENTS; i++) {
        const res = await http(base, {
          path: '/v1/events',
          token: producerKey,
          body: { tenant_id: tenantId, type: 'order.created', data: { i } },
        });
        expect(res.status).toBe(202);
        ids.push(res.body.id);
      }
      await waitFor(() => receiver.received().length >= EVENTS, 20_000, 'half of the deliveries');
      const exit = await p.kill('SIGTERM'); // while the rest are in flight or queued
      expect(exit).toEqual({ code: 0, signal: null });

      // Whatever was sent was recorded before the exit; nothing is left leased.
      const state = await leaseState();
      expect(state.leased).toEqual([]);
      expect(state.inflight).toEqual([]);

      // Restart and let the rest go out; then /metrics counts this process's attempts.
      const q = await startHookrailProcess({
        env,
      });
      const before = receiver.received().length;
      const distinct = () => new Set(receiver.received().map((r) => r.headers['webhook-id'])).size;
      await waitFor(() => distinct() === 2 * EVENTS, 20_000, 'every delivery');
      const sentByQ = receiver.received().length - before;
      expect(sentByQ).toBeGreaterThan(0);
      const deliveredOnMetrics = async () => {
        const text = await fetch(`${q.url}/metrics`).then((r) => r.text());
        const m = /^hookrail_attempts_total\{outcome="delivered"[^}]*\} (\d+)$/m.exec(text);
        return m ? Number(m[1]) : 0;
      };
      await waitFor(async () => (await deliveredOnMetrics()) >= sentByQ, 10_000, 'the attempts on /metrics');
      expect(await q.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    } finally {
      await receiver.close();
      await schema?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
