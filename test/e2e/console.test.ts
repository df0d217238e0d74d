/**
 * The web console end to end in headless Chromium (PRODUCT.md §9), against a Hookrail listening on a real port
 * (SQLite, every role) that delivers to a real local receiver: sign in with a tenant key, register an endpoint
 * and take its secret from the page (the receiver verifies deliveries with it through the Standard Webhooks
 * libraries), read health and charts, inspect an attempt, replay, rotate the secret, disable and re-enable with
 * a backlog choice. The page must run under its content security policy without a single error.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { base32Decode, totpCode } from '../../src/domain/totp.ts';
import { browserMissing, type HeadlessBrowser, launchBrowser } from '../support/browser.ts';
import { Receiver } from '../support/receiver.ts';
import { createTestApp, type TestApp } from '../support/test-hookrail.ts';
import { verifyWithLibraries } from '../support/verify.ts';
import { waitFor } from '../support/wait.ts';

const skip = browserMissing() !== null;
const ROLES = ['intake', 'control', 'fanout', 'delivery', 'replay', 'maintenance'] as const;
// Strangers choose what endpoints answer and tenants what they type: both must reach the page as text only.
const HOSTILE_BODY = '<script>window.pwned = "response"</script><img src=x onerror="window.pwned = 1">';
const HOSTILE_DESCRIPTION = '<img src=x onerror="window.pwned = 2"> orders';

describe.skipIf(skip)('web console', () => {
  let t: TestApp;
  let base: string;
  let receiver: Receiver;
  let chrome: HeadlessBrowser;
  let page: Page;
  let tenantKey: string;
  let producerKey: string;
  let tenantId: string;
  let totpSeed: string;
  const problems: string[] = [];
  const refused: string[] = [];

  beforeAll(async () => {
    receiver = await Receiver.start();
    // Rejections are permanent failures: dead-lettered at once, so the test needs no retry wait.
    receiver.answer((req) =>
      req.body.toString().includes('order.rejected') ? { status: 410, body: HOSTILE_BODY } : { status: 204 },
    );
    t = await createTestApp('sqlite', {
      roles: [...ROLES],
      env: { HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8', HOOKRAIL_POLL_MS: '10' },
    });
    base = await t.hookrail.app!.listen({ host: '127.0.0.1', port: 0 });
    const tenant = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } });
    tenantKey = tenant.body.tenant_key;
    tenantId = tenant.body.id;
    totpSeed = tenant.body.step_up.totp_seed;
    producerKey = (await t.request({ method: 'POST', url: '/v1/producer-keys', body: { name: 'shop' } })).body
      .key;
    chrome = await launchBrowser();
    page = await chrome.context.newPage();
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    // A failed request also logs "Failed to load resource"; those are checked by status below instead.
    page.on('console', (m) => {
      if ((m.type() === 'error' || m.type() === 'warning') && !m.text().startsWith('Failed to load resource'))
        problems.push(`console ${m.type()}: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400)
        refused.push(`${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`);
    });
  }, 60_000);

  afterAll(async () => {
    await chrome?.close();
    await t?.close();
    await receiver?.close();
  });

  const send = async (type: string) => {
    const r = await t.request({
      method: 'POST',
      url: '/v1/events',
      token: producerKey,
      body: { tenant_id: tenantId, type, data: { order: type } },
    });
    expect(r.status).toBe(202);
    return r.body.id as string;
  };

  /**
   * Resolves the open dialog with the button named `label`, and waits for that dialog (not the next one an
   * action may open at once, such as the new secret's) to go.
   */
  const answer = async (label: string) => {
    const dialog = (await page.locator('dialog[open]').elementHandle())!;
    await (await dialog.$(`button:text-is("${label}")`))!.click();
    await dialog.waitForElementState('hidden');
  };

  let secret: string;
  let endpointId: string;

  it('is served with a strict content security policy, and caches by ETag', async () => {
    const res = await fetch(`${base}/console/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    await res.text();
    const js = await fetch(`${base}/console/app.js`);
    expect(js.headers.get('content-type')).toMatch(/javascript/);
    expect((await js.text()).length).toBeGreaterThan(1000);
    const etag = js.headers.get('etag')!;
    expect((await fetch(`${base}/console/app.js`, { headers: { 'if-none-match': etag } })).status).toBe(304);
  });

  it('refuses a wrong key, then signs in with the tenant key', async () => {
    await page.goto(`${base}/console/`);
    await page.getByLabel('Tenant key').fill('hkt_not_a_key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/unauthorized|key/i);
    await page.getByLabel('Tenant key').fill(tenantKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Endpoints' }).waitFor();
    await page.getByText('No endpoints yet').waitFor();
  });

  it('registers an endpoint and shows its secret once; deliveries verify with that secret', async () => {
    await page.getByLabel('URL').fill(receiver.url());
    await page.getByLabel('Description').fill(HOSTILE_DESCRIPTION);
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    secret = (await page.getByTestId('new-secret').textContent())!;
    expect(secret).toMatch(/^whsec_/);
    await answer('Done');
    const row = page.getByTestId('endpoints').locator('tbody tr');
    await expect.poll(() => row.count()).toBe(1);
    endpointId = (await row.getByRole('link').getAttribute('href'))!.split('/').at(-1)!;
    expect(await row.textContent()).toContain(HOSTILE_DESCRIPTION);
    expect(await page.locator('main img').count()).toBe(0);

    for (const type of ['order.created', 'order.created', 'order.paid', 'order.rejected']) await send(type);
    await waitFor(() => receiver.received().length === 4, 15_000);
    // Received is not yet recorded: wait for the four attempts' results before the pages read them.
    await waitFor(
      async () =>
        (
          await t.request({
            method: 'GET',
            url: `/v1/endpoints/${endpointId}/deliveries?status=pending`,
            token: tenantKey,
          })
        ).body.data.length === 0,
      15_000,
      'the attempts recorded',
    );
    for (const req of receiver.received()) verifyWithLibraries(secret, req);
  });

  it('shows health, the charts and the delivery history of the endpoint', async () => {
    await page.goto(`${base}/console/#/endpoints/${endpointId}?window=1h`);
    const health = page.getByTestId('health');
    await health.getByRole('columnheader', { name: 'Last hour' }).waitFor();
    expect(await health.textContent()).toContain('75%');
    expect(await health.locator('[data-reason="recent_dead_letter"]').count()).toBe(1);
    const success = page.getByTestId('chart-success').locator('rect[data-series="delivered"]');
    await expect.poll(() => success.count()).toBeGreaterThan(0);
    expect(await success.last().getAttribute('data-value')).toBe('75');
    const latency = page.getByTestId('chart-latency');
    expect(await latency.locator('rect[data-series="Hookrail (platform)"]').count()).toBeGreaterThan(0);
    expect(await latency.locator('rect[data-series="your endpoint (consumer)"]').count()).toBeGreaterThan(0);
    expect(await page.getByTestId('chart-backlog').locator('circle').count()).toBe(12);
    const rows = page.getByTestId('deliveries').locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(4);
    await page.getByLabel('Status').selectOption('dead');
    await expect.poll(() => rows.count()).toBe(1);
  });

  it('inspects the dead letter exactly as it was sent, and replays it with its webhook-id', async () => {
    await page.getByTestId('deliveries').locator('tbody tr a').first().click();
    const inspector = page.getByTestId('inspector');
    await inspector.waitFor();
    const rejected = receiver.received().find((r) => r.body.toString().includes('order.rejected'))!;
    const headers = await page.getByTestId('request-headers-0').textContent();
    expect(headers).toContain(rejected.headers['webhook-id']);
    expect(headers).toContain(rejected.headers['webhook-signature']);
    expect(JSON.parse((await page.getByTestId('request-body').textContent())!)).toEqual(
      JSON.parse(rejected.body.toString()),
    );
    expect(await page.getByTestId('response-body').textContent()).toBe(HOSTILE_BODY);
    expect(await page.locator('main img, main script').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { pwned?: unknown }).pwned)).toBeUndefined();
    expect(await inspector.textContent()).toContain('410');
    const curl = (await page.getByTestId('curl').textContent())!;
    expect(curl).toContain(`-H 'webhook-id: ${rejected.headers['webhook-id']}'`);
    expect(curl).not.toContain('content-length');

    await page.getByRole('button', { name: 'Replay…' }).click();
    await answer('Replay');
    await page.getByText('Replay queued').waitFor();
    await waitFor(() => receiver.received().length === 5, 15_000);
    expect(receiver.received()[4]!.headers['webhook-id']).toBe(rejected.headers['webhook-id']);
  });

  it('rotates the secret: the new one is shown once and signs beside the old one', async () => {
    await page.goto(`${base}/console/#/endpoints/${endpointId}`);
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await answer('Rotate');
    const rotated = (await page.getByTestId('rotated-secret').textContent())!;
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    await answer('Done');
    // Workers re-read secrets within HOOKRAIL_SECRET_CACHE_MS; the event after that carries both signatures.
    await waitFor(async () => {
      const before = receiver.received().length;
      await send('order.created');
      await waitFor(() => receiver.received().length > before, 15_000);
      return receiver.received().at(-1)!.headers['webhook-signature']!.split(' ').length === 2;
    }, 20_000);
    const last = receiver.received().at(-1)!;
    verifyWithLibraries(rotated, last);
    verifyWithLibraries(secret, last);
  });

  it('lists both signing secrets and retires the previous one early', async () => {
    const rows = page.getByTestId('secrets').locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(2);
    await rows.nth(1).getByRole('button', { name: 'Retire now' }).click();
    await answer('Retire');
    await expect.poll(() => page.getByTestId('secrets').locator('tbody tr').count()).toBe(1);
    await waitFor(async () => {
      const before = receiver.received().length;
      await send('order.created');
      await waitFor(() => receiver.received().length > before, 15_000);
      return receiver.received().at(-1)!.headers['webhook-signature']!.split(' ').length === 1;
    }, 20_000);
    expect(() => verifyWithLibraries(secret, receiver.received().at(-1)!)).toThrow();
  });

  it('edits the settings; a new URL needs the authenticator code', async () => {
    await page.getByTestId('settings').getByRole('button', { name: 'Edit…' }).click();
    const dialog = page.locator('dialog[open]');
    await dialog.getByLabel('Description').fill('orders, moved');
    await dialog.getByLabel('Event types').fill('order.*');
    await dialog.getByLabel('URL').fill(receiver.url('/moved'));
    await answer('Save');
    // The API asks for a step-up: the console asks for the code and sends the change again with the token.
    const code = page.locator('dialog[open]');
    await code.getByText('Confirm with your authenticator').waitFor();
    await code.getByLabel('Code').fill(totpCode(base32Decode(totpSeed), Date.now()));
    await answer('Confirm');
    await page.getByText('Saved: url, description, event_types.').waitFor();
    const settings = await page.getByTestId('settings').textContent();
    expect(settings).toContain(receiver.url('/moved'));
    expect(settings).toContain('order.*');
    await send('order.shipped');
    await waitFor(() => receiver.received('/moved').length === 1, 15_000);
  });

  it('disables, then re-enables only with an explicit backlog choice', async () => {
    await page.getByRole('button', { name: 'Disable' }).click();
    await answer('Disable');
    await page.getByRole('button', { name: 'Re-enable…' }).waitFor();
    const sent = receiver.received().length;
    await send('order.created');
    await page.getByRole('button', { name: 'Re-enable…' }).click();
    const dialog = page.locator('dialog[open]');
    await dialog.getByText('1 delivery waits').waitFor();
    await dialog.getByRole('button', { name: 'Re-enable', exact: true }).click();
    await dialog.getByText('Choose what happens to the backlog.').waitFor();
    await dialog.getByLabel(/Skip it/).check();
    await answer('Re-enable');
    await page.getByText('Endpoint enabled: 0 due now, 1 skipped.').waitFor();
    await page.getByRole('button', { name: 'Disable' }).waitFor();
    expect(receiver.received().length).toBe(sent);
  });

  it('shows the activity: the notice e-mail, the notices sent and the audit trail of every change', async () => {
    await page.getByRole('link', { name: 'Activity' }).click();
    await page.getByLabel('Send notices to').fill('ops@example.com');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Notices go to ops@example.com.').waitFor();
    expect(
      (await t.request({ method: 'GET', url: '/v1/notification-channel', token: tenantKey })).body,
    ).toEqual({
      email: 'ops@example.com',
    });
    // The first dead letter of the day made a notice (listed; there was no e-mail address then).
    await expect.poll(() => page.getByTestId('notifications').locator('tbody tr').count()).toBeGreaterThan(0);
    // A reload keeps the session (the key is in the tab's sessionStorage) and reads the trail again.
    await page.reload();
    const audit = page.getByTestId('audit');
    await audit.waitFor();
    const text = (await audit.textContent())!;
    for (const action of [
      'endpoint.created',
      'delivery.replayed',
      'secret.rotated',
      'secret.retired',
      'endpoint.url_changed',
      'endpoint.disabled',
      'endpoint.enabled',
      'notification_channel.updated',
    ]) {
      expect(text).toContain(action);
    }
  });

  it('asks again, with the count, before replaying more than 100 deliveries', {
    timeout: 90_000,
  }, async () => {
    // Delivered ones (replaying dead letters would need 101 of them, and the circuit opens long before).
    const count = async (status: string) =>
      (
        await t.request({
          method: 'GET',
          url: `/v1/endpoints/${endpointId}/deliveries?status=${status}&limit=500`,
          token: tenantKey,
        })
      ).body.data.length;
    const before = await count('delivered');
    await Promise.all(Array.from({ length: 101 }, () => send('order.created')));
    // Every one of them fanned out and delivered (a 202 comes before fan-out, so "nothing pending" alone could
    // be seen before the last deliveries exist), so the count asked about cannot grow before the confirmation.
    await waitFor(
      async () => (await count('delivered')) >= before + 101 && (await count('pending')) === 0,
      60_000,
      'deliveries',
    );
    await page.goto(`${base}/console/#/endpoints/${endpointId}`);
    await page.getByRole('button', { name: 'Replay…' }).click();
    await page.locator('dialog[open]').getByLabel('Replay').selectOption('delivered');
    await answer('Replay');
    const again = page.locator('dialog[open]');
    const title = (await again.getByRole('heading').textContent())!;
    const n = Number(/^Replay (\d+) deliveries\?$/.exec(title)?.[1]);
    expect(n).toBeGreaterThan(101);
    await answer(`Replay ${n}`);
    // Polled on the status line's text, so that a failure shows what the page said instead.
    await expect
      .poll(() => page.locator('[data-status]').textContent(), { timeout: 30_000 })
      .toContain(`${n} replays queued`);
    const replayed = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpointId}/deliveries?status=pending&limit=500`,
      token: tenantKey,
    });
    expect(
      replayed.body.data.filter((d: { replayed_from: string | null }) => d.replayed_from).length,
    ).toBeGreaterThan(0);
  });

  it('refuses a link whose id is not an id, without calling the API with it', async () => {
    const asked: string[] = [];
    const listen = (r: { url(): string }) => asked.push(new URL(r.url()).pathname);
    page.on('request', listen);
    await page.goto(`${base}/console/#/endpoints/..%2Fdeliveries%2Fdlv_1`);
    await page.getByText('No such page.').waitFor();
    page.off('request', listen);
    // (The page before may still be loading its own lists: only the link's target counts.) A path built from the
    // link would read /v1/endpoints/../deliveries/dlv_1, which the browser normalises to /v1/deliveries/dlv_1.
    expect(asked.filter((p) => p.includes('dlv_1'))).toEqual([]);
  });

  it('ran without a page error or a policy violation, and no request was refused but the wrong key', () => {
    expect(problems).toEqual([]);
    // The wrong key, and the URL change sent first without a step-up token.
    expect(refused).toEqual([
      '401 GET /v1/endpoints',
      `403 PATCH /v1/endpoints/${endpointId}`,
      `409 POST /v1/endpoints/${endpointId}/replay`,
    ]);
  });
});
