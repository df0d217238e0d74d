/**
 * The audit trail through the HTTP API, on both stores (ADR-16: "every subscription change, secret rotation,
 * enable/disable and replay is written to an audit record"): each tenant action that changes an endpoint, its
 * secrets, its deliveries or the notification channel leaves exactly one record naming the action, its target and
 * the key that acted, and a refused action leaves none. The bulk replay's record: endpoint-replay.test.ts; the
 * auto-disable's (written by maintenance): the outage journey.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { endpointsApi, type TenantFixture } from '../../test/support/endpoints-api.ts';
import { STORE_KINDS } from '../../test/support/test-hookrail.ts';

interface AuditJson {
  id: string;
  tenant_id: string;
  actor: string;
  action: string;
  target_type: string;
  target_id: string;
  details: Record<string, unknown> | null;
}

describe.each(STORE_KINDS)('audit trail API on %s', (kind) => {
  const api = endpointsApi(kind);
  const { asTenant, stepUp, create, clock } = api;
  let acme: TenantFixture;
  let other: TenantFixture;
  beforeAll(() => {
    ({ acme, other } = api.state());
  });

  /** The tenant's audit records, oldest first. */
  const trail = async (tenant: TenantFixture): Promise<AuditJson[]> => {
    const res = await asTenant(tenant)({ method: 'GET', url: '/v1/audit-events?limit=100' });
    expect(res.status).toBe(200);
    return (res.body.data as AuditJson[]).slice().reverse();
  };

  it('writes one record for each change a tenant makes, and none for a refused one', async () => {
    const as = asTenant(acme);
    const before = (await trail(acme)).length;
    // A millisecond between steps: records made in one millisecond have no order among themselves.
    const step = async (req: Parameters<typeof as>[0], status: number) => {
      clock.advance(1);
      const res = await as(req);
      expect(res.status, JSON.stringify(res.body)).toBe(status);
      return res.body;
    };

    clock.advance(1);
    const ep = await create(acme);
    const url = `/v1/endpoints/${ep.id}`;
    await step({ method: 'PATCH', url, body: { event_types: ['*'] } }, 200);
    await step({ method: 'PATCH', url, body: { url: 'https://elsewhere.example.com/hook' } }, 403); // no step-up
    const { token } = await stepUp(acme); // advances the clock by a TOTP step
    await step(
      {
        method: 'PATCH',
        url,
        body: { url: 'https://elsewhere.example.com/hook' },
        headers: { 'x-step-up-token': token },
      },
      200,
    );
    const rotated = await step({ method: 'POST', url: `${url}/secrets`, body: {} }, 201);
    const secrets = await step({ method: 'GET', url: `${url}/secrets` }, 200);
    const old = (secrets.data as { id: string }[]).find((s) => s.id !== rotated.id)!;
    await step({ method: 'DELETE', url: `${url}/secrets/${old.id}` }, 204);
    await step({ method: 'DELETE', url: `${url}/secrets/${rotated.id}` }, 409); // the last active one
    await step({ method: 'POST', url: `${url}/disable` }, 200);
    await step({ method: 'POST', url: `${url}/enable`, body: { backlog: 'skip' } }, 200);
    const test = await step({ method: 'POST', url: `${url}/test` }, 202);
    const deliveryId = test.delivery.id as string;
    const replay = await step({ method: 'POST', url: `/v1/deliveries/${deliveryId}/replay` }, 202);
    await step({ method: 'PUT', url: '/v1/notification-channel', body: { email: 'ops@acme.example' } }, 200);
    await step({ method: 'DELETE', url }, 204);
    await step({ method: 'DELETE', url }, 404);

    const records = (await trail(acme)).slice(before);
    expect(records.map((r) => [r.action, r.target_type, r.target_id])).toEqual([
      ['endpoint.created', 'endpoint', ep.id],
      ['endpoint.updated', 'endpoint', ep.id],
      ['endpoint.url_changed', 'endpoint', ep.id],
      ['secret.rotated', 'endpoint', ep.id],
      ['secret.retired', 'endpoint', ep.id],
      ['endpoint.disabled', 'endpoint', ep.id],
      ['endpoint.enabled', 'endpoint', ep.id],
      ['endpoint.test_sent', 'endpoint', ep.id],
      ['delivery.replayed', 'delivery', deliveryId],
      ['notification_channel.updated', 'tenant', acme.id],
      ['endpoint.deleted', 'endpoint', ep.id],
    ]);
    for (const r of records) expect(r.tenant_id).toBe(acme.id);
    // Every record names the key that acted, and no record holds a secret.
    expect(new Set(records.map((r) => r.actor)).size).toBe(1);
    expect(records[0]!.actor).toMatch(/\S/);
    const text = JSON.stringify(records);
    expect(text).not.toContain('whsec_');
    expect(text).not.toContain(acme.key);
    expect(records.find((r) => r.action === 'delivery.replayed')!.details).toMatchObject({
      replay_id: replay.id,
    });
    // Another tenant's trail holds none of this.
    expect((await trail(other)).filter((r) => r.target_id === ep.id)).toEqual([]);
  });
});
