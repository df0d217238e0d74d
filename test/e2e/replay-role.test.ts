/**
 * ADR-10 and PRODUCT.md §6: "Replay … on its own worker budget so it cannot starve first attempts". The replay role
 * is that budget: replays are leased only by processes that run it, in slots of their own.
 *
 * On one PostgreSQL schema, one process runs every role but `replay`. Twenty events are delivered; then all twenty are
 * replayed in bulk, and more events go in. The replays stay queued (no process may lease them) while the new events
 * are delivered at once. A second process started with `--roles replay` alone then sends the replays — each with its
 * original `webhook-id`, ten a second — while the first keeps delivering new events.
 */
import { expect, it } from 'vitest';
import {
  createEndpoint,
  createTenant,
  deliveryE2eStore,
  listDeliveries,
  printWorkerOutputOnFailure,
  startHookrailProcess,
} from '../support/delivery-e2e.ts';
import { useCleanups, useHookrailProcesses } from '../support/hookrail-process.ts';
import { http, sleep } from '../support/intake-load.ts';
import { Receiver } from '../support/receiver.ts';
import { waitFor } from '../support/wait.ts';

useHookrailProcesses();
printWorkerOutputOnFailure();

const ADMIN_TOKEN = 'hka_e2e_replay_role_operator_token';
const cleanups = useCleanups();

it('replays are sent only by a process with the replay role, beside first deliveries', {
  timeout: 60_000,
}, async () => {
  const { env } = await deliveryE2eStore({
    kind: 'postgres',
    label: 'replayrole',
    adminToken: ADMIN_TOKEN,
    cleanups,
  });
  const receiver = await Receiver.start();
  cleanups.push(() => receiver.close());
  receiver.answer(() => ({ status: 204 }));
  const byId = () => {
    const n = new Map<string, number>();
    for (const r of receiver.received())
      n.set(r.headers['webhook-id']!, (n.get(r.headers['webhook-id']!) ?? 0) + 1);
    return n;
  };

  const main = await startHookrailProcess({
    env: { ...env, HOOKRAIL_ROLES: 'intake,control,fanout,delivery,maintenance' },
    name: 'all-but-replay',
  });
  const base = main.url!;
  const { tenantId, tenantKey, producerKey } = await createTenant(base, ADMIN_TOKEN);
  const endpointId = await createEndpoint(base, tenantKey, receiver.url('/in'));
  const send = async (n: number, run: string) => {
    for (let i = 0; i < n; i++) {
      const res = await http(base, {
        path: '/v1/events',
        token: producerKey,
        body: { tenant_id: tenantId, type: 'order.created', data: { run, i } },
      });
      expect(res.status).toBe(202);
    }
  };

  await send(20, 'first');
  await waitFor(() => receiver.received().length === 20, 15_000, 'the first twenty');
  const originals = new Set(byId().keys());
  await waitFor(
    async () => (await listDeliveries(base, tenantKey, endpointId, { status: 'delivered' })).length === 20,
    10_000,
    'the first twenty recorded as delivered',
  );

  const replay = await http(base, {
    path: `/v1/endpoints/${endpointId}/replay`,
    token: tenantKey,
    body: { status: ['delivered'] },
  });
  expect(replay.status).toBe(202);
  expect(replay.body).toMatchObject({ count: 20, rate_per_second: 10 });
  await send(5, 'during');
  // The new events go out at once; the replays, all due within two seconds, stay queued without a replay process.
  await waitFor(() => receiver.received().length === 25, 15_000, 'the five new events');
  await sleep(Date.parse(replay.body.last_due_at) - Date.now() + 1_000);
  expect(receiver.received()).toHaveLength(25);
  const queued = (await listDeliveries(base, tenantKey, endpointId, { status: 'pending' })).filter(
    (d) => d.replayed_from !== null,
  );
  expect(queued).toHaveLength(20);

  await startHookrailProcess({ env: { ...env, HOOKRAIL_ROLES: 'replay' }, name: 'replay' });
  const started = Date.now(); // once it is running: its start-up (slow on a loaded machine) is not what is timed
  await send(5, 'after');
  await waitFor(() => receiver.received().length === 50, 20_000, 'the replays and five more events');
  const counts = byId();
  for (const id of originals) expect(counts.get(id)).toBe(2); // each replay with its original webhook-id
  expect([...counts.values()].filter((n) => n === 1)).toHaveLength(10); // the new events, once each
  // The replays were due already: the replay process sent them as fast as it could.
  expect(Date.now() - started).toBeLessThan(20_000);
  // Recorded too (the attempt is written after the answer arrived).
  await waitFor(
    async () =>
      (await listDeliveries(base, tenantKey, endpointId)).filter(
        (d) => d.replayed_from !== null && d.status === 'delivered',
      ).length === 20,
    10_000,
    'the replays recorded as delivered',
  );
  await sleep(300);
  expect(receiver.received()).toHaveLength(50);
});
