/**
 * Queue lanes through the API and metrics, on both stores: an endpoint's health shows its lane (scheme v1 at
 * creation, then the maintenance pass's moves with the previous lane and the drain count), and /metrics counts
 * moves by direction and reports dedicated endpoints and backlog per lane with bounded labels.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { createTestApp, STORE_KINDS, type TestApp } from '../../test/support/test-hookrail.ts';
import { dedicatedLane, sharedLane } from '../domain/lanes.ts';

describe.each(STORE_KINDS)('queue lanes in health and metrics on %s', (kind) => {
  let t: TestApp;
  const clock = new FakeClock();
  let tenant: { id: string; tenant_key: string };
  let endpointId: string;

  beforeAll(async () => {
    t = await createTestApp(kind, {
      clock,
      roles: ['intake', 'control', 'fanout', 'maintenance'],
      env: {
        HOOKRAIL_SHARED_LANES: '4',
        HOOKRAIL_LANE_PROMOTE_BACKLOG: '3',
        HOOKRAIL_LANE_DEMOTE_BACKLOG: '0',
        HOOKRAIL_LANE_MIN_DWELL_MS: '60000',
        HOOKRAIL_MAINTENANCE_MS: '3600000', // the test runs the passes itself
      },
    });
    tenant = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Lanes' } })).body;
    const ep = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: tenant.tenant_key,
      body: { url: 'https://hooks.example.com/in', event_types: ['*'] },
    });
    expect(ep.status, JSON.stringify(ep.body)).toBe(201);
    endpointId = ep.body.id;
  });
  afterAll(() => t?.close());

  const health = async () =>
    (await t.request({ method: 'GET', url: `/v1/endpoints/${endpointId}/health`, token: tenant.tenant_key }))
      .body;
  const metrics = async () => (await t.hookrail.app!.inject({ method: 'GET', url: '/metrics' })).body;

  it('a new endpoint is in its shared lane by hash, under the configured lane count', async () => {
    expect((await health()).lane).toEqual({
      id: sharedLane(endpointId, 4),
      kind: 'shared',
      since: new Date(clock.now()).toISOString(),
      previous: null,
      draining: 0,
    });
    const m = await metrics();
    expect(m).toMatch(/^hookrail_lane_dedicated_endpoints 0$/m);
    expect(m).toMatch(/^hookrail_lane_moves_total\{direction="promoted"\} 0$/m);
  });

  it('a backlog over the threshold promotes it at the next maintenance pass; health and metrics show it', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await t.request({
        method: 'POST',
        url: '/v1/events',
        body: { tenant_id: tenant.id, type: 'lane.test', data: { i } },
      });
      expect(res.status).toBe(202);
    }
    while ((await t.hookrail.workers.fanout!.runOnce()).events > 0);
    clock.advance(1000);
    await t.hookrail.workers.maintenance!.runOnce();
    const lane = (await health()).lane;
    expect(lane).toEqual({
      id: dedicatedLane(endpointId),
      kind: 'dedicated',
      since: new Date(clock.now()).toISOString(),
      previous: sharedLane(endpointId, 4),
      draining: 0,
    });
    const m = await metrics();
    expect(m).toMatch(/^hookrail_lane_moves_total\{direction="promoted"\} 1$/m);
    expect(m).toMatch(/^hookrail_lane_dedicated_endpoints 1$/m);
    expect(m).toMatch(/^hookrail_lane_backlog_deliveries\{lane="dedicated"\} 3$/m);
    expect(m).not.toContain(endpointId);
  });
});
