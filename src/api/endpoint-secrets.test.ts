/**
 * Signing secrets and step-up through the HTTP API, on both stores: the URL change as an elevated action, and
 * rotation. Endpoint CRUD and input rules: endpoints.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { endpointsApi, type TenantFixture } from '../../test/support/endpoints-api.ts';
import { STORE_KINDS, type TestApp } from '../../test/support/test-hookrail.ts';
import { TOTP_STEP_SECONDS, totpCode } from '../domain/totp.ts';

const DAY_MS = 24 * 3600 * 1000;

describe.each(STORE_KINDS)('endpoint secrets and step-up API on %s', (kind) => {
  const api = endpointsApi(kind);
  const { clock, newTenant, asTenant, stepUp, create } = api;
  let t: TestApp;
  let acme: TenantFixture;
  let other: TenantFixture;
  beforeAll(() => {
    ({ t, acme, other } = api.state());
  });

  describe('step-up', () => {
    it('guards a URL change: 403 step_up_required without a token, 200 with one', async () => {
      const ep = await create(acme);
      const change = (token?: string) =>
        asTenant(acme)({
          method: 'PATCH',
          url: `/v1/endpoints/${ep.id}`,
          body: { url: 'https://new.example.com/hook' },
          ...(token ? { headers: { 'x-step-up-token': token } } : {}),
        });
      const without = await change();
      expect(without.status).toBe(403);
      expect(without.body.error).toMatchObject({
        code: 'step_up_required',
        details: { step_up_url: '/v1/auth/step-up' },
      });
      const garbage = await change('su1.nope');
      expect(garbage.status).toBe(403);
      expect(garbage.body.error.code).toBe('step_up_required');
      expect((await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}` })).body.url).toBe(ep.url);

      const { token, expires_at } = await stepUp(acme);
      expect(token).toMatch(/^su1\.ten_[0-9A-Z]{26}\.\d+\.[A-Za-z0-9_-]{43}$/);
      expect(Date.parse(expires_at)).toBe(clock.now() + 5 * 60 * 1000);
      const withToken = await change(token);
      expect(withToken.status, JSON.stringify(withToken.body)).toBe(200);
      expect(withToken.body.url).toBe('https://new.example.com/hook');
      // The token is reusable until it expires (5 minutes), then refused.
      clock.advance(4 * 60 * 1000);
      const back = await asTenant(acme)({
        method: 'PATCH',
        url: `/v1/endpoints/${ep.id}`,
        body: { url: ep.url },
        headers: { 'x-step-up-token': token },
      });
      expect(back.status).toBe(200);
      clock.advance(60 * 1000);
      const expired = await change(token);
      expect(expired.status).toBe(403);
      expect(expired.body.error).toMatchObject({ code: 'step_up_required', details: { reason: 'expired' } });
    });

    it("refuses another tenant's token, a tampered token, and wrong or reused codes", async () => {
      const ep = await create(acme);
      const foreign = await stepUp(other);
      const res = await asTenant(acme)({
        method: 'PATCH',
        url: `/v1/endpoints/${ep.id}`,
        body: { url: 'https://new.example.com/' },
        headers: { 'x-step-up-token': foreign.token },
      });
      expect(res.status).toBe(403);
      expect(res.body.error.details.reason).toBe('invalid');
      const own = await stepUp(acme);
      const [v, ten, exp, mac] = own.token.split('.');
      const longer = `${v}.${ten}.${Number(exp) + 3_600_000}.${mac}`;
      const tampered = await asTenant(acme)({
        method: 'PATCH',
        url: `/v1/endpoints/${ep.id}`,
        body: { url: 'https://new.example.com/' },
        headers: { 'x-step-up-token': longer },
      });
      expect(tampered.status).toBe(403);

      clock.advance(TOTP_STEP_SECONDS * 1000);
      const code = totpCode(acme.seed, clock.now());
      const wrong = String((Number(code) + 1) % 1_000_000).padStart(6, '0');
      const bad = await asTenant(acme)({ method: 'POST', url: '/v1/auth/step-up', body: { totp: wrong } });
      expect(bad.status).toBe(403);
      expect(bad.body.error.code).toBe('invalid_totp');
      const good = await asTenant(acme)({ method: 'POST', url: '/v1/auth/step-up', body: { totp: code } });
      expect(good.status).toBe(200);
      const reused = await asTenant(acme)({ method: 'POST', url: '/v1/auth/step-up', body: { totp: code } });
      expect(reused.status).toBe(403);
      expect(reused.body.error.code).toBe('invalid_totp');
      // Another tenant's seed does not work for this one.
      const otherCode = totpCode(other.seed, clock.now());
      const cross = await asTenant(acme)({
        method: 'POST',
        url: '/v1/auth/step-up',
        body: { totp: otherCode },
      });
      expect(cross.status).toBe(403);
      const malformed = await asTenant(acme)({
        method: 'POST',
        url: '/v1/auth/step-up',
        body: { totp: '12345' },
      });
      expect(malformed.status).toBe(400);
      // The operator steps up with its own seed only: a tenant's code is a wrong one for it.
      const operator = await t.request({ method: 'POST', url: '/v1/auth/step-up', body: { totp: code } });
      expect(operator.status).toBe(403);
      expect(operator.body.error.code).toBe('invalid_totp');
    });

    it('rate-limits wrong codes per tenant with Retry-After', async () => {
      const victim = await newTenant('Brute');
      clock.advance(TOTP_STEP_SECONDS * 1000);
      const code = totpCode(victim.seed, clock.now());
      const wrong = String((Number(code) + 500_000) % 1_000_000).padStart(6, '0');
      for (let i = 0; i < 5; i++) {
        const res = await asTenant(victim)({
          method: 'POST',
          url: '/v1/auth/step-up',
          body: { totp: wrong },
        });
        expect(res.status).toBe(403);
      }
      const limited = await asTenant(victim)({
        method: 'POST',
        url: '/v1/auth/step-up',
        body: { totp: code },
      });
      expect(limited.status).toBe(429);
      expect(limited.body.error.code).toBe('rate_limited');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      clock.advance(5 * 60 * 1000);
      await stepUp(victim);
    });
  });

  describe('secrets', () => {
    it('rotates with overlap, keeps at most two active, never shows them again', async () => {
      const ep = await create(acme);
      const first = ep.secret;
      clock.advance(1000);
      const r1 = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(r1.status, JSON.stringify(r1.body)).toBe(201);
      expect(r1.body.secret).toMatch(/^whsec_/);
      expect(r1.body.secret).not.toBe(first.secret);
      expect(r1.body.active_until).toBeNull();
      expect(r1.body.previous).toEqual({
        id: first.id,
        active_until: new Date(clock.now() + 7 * DAY_MS).toISOString(),
      });
      const list1 = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(list1.status).toBe(200);
      expect(list1.body.data.map((s: { id: string }) => s.id)).toEqual([r1.body.id, first.id]);
      expect(Object.keys(list1.body.data[0]).sort()).toEqual([
        'active_from',
        'active_until',
        'created_at',
        'id',
      ]);

      clock.advance(1000);
      const r2 = await asTenant(acme)({
        method: 'POST',
        url: `/v1/endpoints/${ep.id}/secrets`,
        body: { overlap_seconds: 3600 },
      });
      expect(r2.status).toBe(201);
      expect(r2.body.previous).toEqual({
        id: r1.body.id,
        active_until: new Date(clock.now() + 3600 * 1000).toISOString(),
      });
      const list2 = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      // The third rotation retired the first secret at once: two active.
      expect(list2.body.data.map((s: { id: string }) => s.id)).toEqual([r2.body.id, r1.body.id]);
      const text = JSON.stringify([
        list1.body,
        list2.body,
        await asTenant(acme)({ method: 'GET', url: '/v1/endpoints' }),
      ]);
      for (const s of [first.secret, r1.body.secret, r2.body.secret]) expect(text).not.toContain(s);

      // After the overlap only the newest signs.
      clock.advance(3600 * 1000);
      const list3 = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(list3.body.data.map((s: { id: string }) => s.id)).toEqual([r2.body.id]);
    });

    it('rotates with overlap 0, retires early, refuses to retire the last', async () => {
      const ep = await create(acme);
      const r = await asTenant(acme)({
        method: 'POST',
        url: `/v1/endpoints/${ep.id}/secrets`,
        body: { overlap_seconds: 0 },
      });
      expect(r.status).toBe(201);
      expect(r.body.previous).toBeNull();
      const last = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${r.body.id}`,
      });
      expect(last.status).toBe(409);
      expect(last.body.error.code).toBe('last_active_secret');

      const r2 = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/secrets`, body: {} });
      const retire = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${r.body.id}`,
      });
      expect(retire.status).toBe(204);
      const list = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(list.body.data.map((s: { id: string }) => s.id)).toEqual([r2.body.id]);
      const again = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${r.body.id}`,
      });
      expect(again.status).toBe(404);
      const unknown = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/sec_00000000000000000000000000`,
      });
      expect(unknown.status).toBe(404);
    });

    it('retiring the new secret during the overlap keeps the previous one in force after the overlap', async () => {
      const ep = await create(acme);
      const first = ep.secret;
      clock.advance(1000);
      const rotated = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(rotated.status).toBe(201);
      expect(rotated.body.previous.active_until).toBe(new Date(clock.now() + 7 * DAY_MS).toISOString());
      clock.advance(1000);
      const retire = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${rotated.body.id}`,
      });
      expect(retire.status).toBe(204);
      // The rotation is undone: the previous secret no longer ends with the overlap.
      const now = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(
        now.body.data.map((s: { id: string; active_until: string | null }) => [s.id, s.active_until]),
      ).toEqual([[first.id, null]]);
      clock.advance(8 * DAY_MS);
      const after = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(after.body.data.map((s: { id: string }) => s.id)).toEqual([first.id]);
      expect(
        (await t.store.secretListActive({ endpointId: ep.id, now: clock.now() })).map((s) => s.id),
      ).toEqual([first.id]);
      const last = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${first.id}`,
      });
      expect(last.status).toBe(409);
      expect(last.body.error.code).toBe('last_active_secret');
    });

    it('retiring the previous secret early leaves the new one in force after the overlap', async () => {
      const ep = await create(acme);
      clock.advance(1000);
      const rotated = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/secrets` });
      const retire = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${ep.secret.id}`,
      });
      expect(retire.status).toBe(204);
      clock.advance(8 * DAY_MS);
      const after = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(
        after.body.data.map((s: { id: string; active_until: string | null }) => [s.id, s.active_until]),
      ).toEqual([[rotated.body.id, null]]);
    });

    it('validates rotation bodies', async () => {
      const ep = await create(acme);
      for (const body of [
        { overlap_seconds: -1 },
        { overlap_seconds: 604_801 },
        { overlap_seconds: 1.5 },
        { x: 1 },
      ]) {
        const res = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/secrets`, body });
        expect(res.status, JSON.stringify(body)).toBe(400);
      }
      expect(await t.store.secretListActive({ endpointId: ep.id, now: clock.now() })).toHaveLength(1);
    });
  });

  it('publishes the retry schedule without credentials and in the OpenAPI document', async () => {
    const res = await t.request({ method: 'GET', url: '/v1/retry-schedule', token: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ version: 1, max_attempts: 12, jitter: 'full' });
    expect(res.body.attempts).toHaveLength(12);
    // A bad credential is not even looked at on a public route.
    const bogus = await t.request({ method: 'GET', url: '/v1/retry-schedule', token: 'hkp_bogus' });
    expect(bogus.status).toBe(200);
    const doc = await t.request({ method: 'GET', url: '/openapi.json', token: null });
    expect(doc.body.paths['/v1/retry-schedule'].get.security).toEqual([]);
    for (const path of [
      '/v1/endpoints',
      '/v1/endpoints/{id}',
      '/v1/endpoints/{id}/secrets/{sid}',
      '/v1/auth/step-up',
      '/v1/attempts/{id}',
    ]) {
      expect(Object.keys(doc.body.paths)).toContain(path);
    }
  });
});
