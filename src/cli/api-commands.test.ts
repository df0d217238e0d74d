/**
 * The CLI's API commands against a Hookrail listening on a real port (SQLite, intake + control + fan-out), run
 * in-process with captured output; and the installed binary once, for its wiring (exit codes, streams).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, childEnv } from '../../test/support/hookrail-process.ts';
import { ADMIN_TOKEN, createTestApp, type TestApp } from '../../test/support/test-hookrail.ts';
import { waitFor } from '../../test/support/wait.ts';
import { base32Decode, totpCode } from '../domain/totp.ts';
import { runTool } from './dispatch.ts';
import type { CliIo } from './io.ts';

let t: TestApp;
let api: string;
let dir: string;

beforeAll(async () => {
  t = await createTestApp('sqlite', { roles: ['intake', 'control', 'fanout'] });
  api = await t.hookrail.app!.listen({ host: '127.0.0.1', port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'hookrail-cli-'));
});
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `hookrail <argv>` in-process; `answer` is what a person types at a confirmation prompt (null: no TTY). */
async function cli(
  argv: string[],
  o: { env?: Record<string, string | undefined>; answer?: boolean | null; stdin?: string } = {},
) {
  let out = '';
  let err = '';
  const asked: string[] = [];
  const io: CliIo = {
    out: (s) => {
      out += s;
    },
    err: (s) => {
      err += s;
    },
    env: { HOOKRAIL_API_URL: api, ...o.env },
    interactive: o.answer !== undefined && o.answer !== null,
    confirm: async (q) => {
      asked.push(q);
      return o.answer === true;
    },
    readStdin: async () => Buffer.from(o.stdin ?? ''),
  };
  const [command, ...args] = argv;
  const code = await runTool(command!, args, io);
  return { code, out, err, asked, json: out ? JSON.parse(out) : null };
}

describe('hookrail tenants, producer-keys, endpoints, events, replay', () => {
  let tenantId: string;
  let tenantKey: string;
  let tenantSeed: Buffer;
  let producerKey: string;
  let endpointId: string;

  it('sets up a tenant, a producer key and an endpoint, and sends an event, as the quick start does', async () => {
    // The operator token from the data directory's admin-token file, as on the machine Hookrail runs on.
    // Only for this machine's Hookrail (HOOKRAIL_HOST / HOOKRAIL_PORT): never sent where --api points.
    writeFileSync(join(dir, 'admin-token'), `${ADMIN_TOKEN}\n`);
    const remote = await cli(['tenants', 'list', '--data-dir', dir]);
    expect(remote.code).toBe(2);
    expect(remote.err).toMatch(/no operator token/);
    const local = {
      HOOKRAIL_API_URL: undefined,
      HOOKRAIL_HOST: '127.0.0.1',
      HOOKRAIL_PORT: new URL(api).port,
    };
    const tenant = await cli(['tenants', 'create', '--name', 'Acme Inc', '--data-dir', dir], { env: local });
    expect(tenant.code, tenant.err).toBe(0);
    tenantId = tenant.json.id;
    tenantKey = tenant.json.tenant_key;
    tenantSeed = base32Decode(tenant.json.step_up.totp_seed);
    expect(tenantKey).toMatch(/^hkt_/);
    const listed = await cli(['tenants', 'list', '--token', ADMIN_TOKEN]);
    expect(listed.json.data.map((x: { id: string }) => x.id)).toContain(tenantId);

    const producer = await cli(['producer-keys', 'create', '--name', 'checkout', '--token', ADMIN_TOKEN]);
    expect(producer.code, producer.err).toBe(0);
    producerKey = producer.json.key;
    expect(producerKey).toMatch(/^hkp_/);

    const ep = await cli(
      [
        'endpoints',
        'create',
        '--url',
        'https://hooks.example.com/in',
        '--event-types',
        'order.*, refund.created',
      ],
      { env: { HOOKRAIL_TOKEN: tenantKey } },
    );
    expect(ep.code, ep.err).toBe(0);
    endpointId = ep.json.id;
    expect(ep.json.event_types).toEqual(['order.*', 'refund.created']);
    expect(ep.json.secret.secret).toMatch(/^whsec_/);
    const got = await cli(['endpoints', 'get', endpointId, '--token', tenantKey]);
    expect(got.json).toMatchObject({ id: endpointId, url: 'https://hooks.example.com/in' });
    expect((await cli(['endpoints', 'health', endpointId, '--token', tenantKey])).code).toBe(0);
    expect((await cli(['endpoints', 'list', '--token', tenantKey])).json.data).toHaveLength(1);
    const rotated = await cli([
      'endpoints',
      'rotate-secret',
      endpointId,
      '--overlap-seconds',
      '60',
      '--token',
      tenantKey,
    ]);
    expect(rotated.code, rotated.err).toBe(0);
    expect(rotated.json.secret).toMatch(/^whsec_/);
    expect(rotated.json.previous.id).toBe(ep.json.secret.id);
    // A type of one's own is an elevated action: refused without --totp, sent with the authenticator's code.
    const testType = ['endpoints', 'test', endpointId, '--type', 'order.tested', '--token', tenantKey];
    const refused = await cli(testType);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/step_up_required/);
    const test = await cli([...testType, '--totp', totpCode(tenantSeed, Date.now())]);
    expect(test.code, test.err).toBe(0);
    expect(test.json.event.type).toBe('order.tested');

    // Data from a file, then the same idempotency key again: the original event back.
    const file = join(dir, 'order.json');
    writeFileSync(file, '{"order_id":"1234"}');
    const send = (data: string, stdin?: string) =>
      cli(
        [
          'events',
          'send',
          '--tenant',
          tenantId,
          '--type',
          'order.created',
          '--data',
          data,
          '--idempotency-key',
          'o-1',
        ],
        { env: { HOOKRAIL_TOKEN: producerKey }, ...(stdin === undefined ? {} : { stdin }) },
      );
    const first = await send(`@${file}`);
    expect(first.code, first.err).toBe(0);
    expect(first.json).toMatchObject({ id: expect.stringMatching(/^evt_/), type: 'order.created' });
    const stored = await t.request({ method: 'GET', url: `/v1/events/${first.json.id}`, token: ADMIN_TOKEN });
    expect(stored.body).toMatchObject({ tenant_id: tenantId, data: { order_id: '1234' } });
    const again = await send('-', '{"order_id":"1234"}');
    expect(again.json.id).toBe(first.json.id);
    // Data is sent as written: an integer beyond 2^53 arrives with every digit.
    const exact = await cli(
      [
        'events',
        'send',
        '--tenant',
        tenantId,
        '--type',
        'order.created',
        '--data',
        ' {"n": 12345678901234567890} ',
      ],
      { env: { HOOKRAIL_TOKEN: producerKey } },
    );
    expect(exact.code, exact.err).toBe(0);
    expect((await t.store.eventGet({ id: exact.json.id, tenantId }))?.data).toBe(
      '{"n": 12345678901234567890}',
    );
  });

  it('reports an error answer by its code, and a missing key or argument as a usage error', async () => {
    const bad = await cli(['endpoints', 'create', '--url', 'ftp://x.example.com/', '--token', tenantKey]);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/^error: [a-z_]+: /);
    expect(bad.out).toBe('');
    const noKey = await cli(['endpoints', 'list']);
    expect(noKey.code).toBe(2);
    expect(noKey.err).toMatch(/no API key/);
    expect((await cli(['endpoints', 'get', '--token', tenantKey])).code).toBe(2);
    expect((await cli(['events', 'send', '--tenant', tenantId, '--token', producerKey])).err).toMatch(
      /--type is required/,
    );
    const wrongOperator = await cli(['tenants', 'list', '--token', 'hka_wrong']);
    expect(wrongOperator.code).toBe(1);
    const down = await cli(['tenants', 'list', '--token', ADMIN_TOKEN], {
      env: { HOOKRAIL_API_URL: 'http://127.0.0.1:9' },
    });
    expect(down).toMatchObject({ code: 1 });
    expect(down.err).toMatch(/cannot reach Hookrail/);
  });

  it('bulk replay asks before replaying more than 100, and replays each delivery once', async () => {
    // 150 deliveries for the endpoint (147 here, the two events sent above and the test event), skipped on
    // re-enable.
    for (let i = 0; i < 147; i++) {
      const res = await t.request({
        method: 'POST',
        url: '/v1/events',
        token: producerKey,
        body: { tenant_id: tenantId, type: 'order.created', data: { i } },
      });
      expect(res.status).toBe(202);
    }
    const backlog = async () =>
      (await t.request({ method: 'GET', url: `/v1/endpoints/${endpointId}/backlog`, token: tenantKey })).body;
    await waitFor(async () => (await backlog()).pending === 150, 10_000, 'fanned out');
    const as = { env: { HOOKRAIL_TOKEN: tenantKey } };
    expect((await cli(['endpoints', 'disable', endpointId], as)).json.status).toBe('disabled');
    // The backlog choice is never implied.
    const unchosen = await cli(['endpoints', 'enable', endpointId], as);
    expect(unchosen.code).toBe(2);
    expect(unchosen.err).toMatch(/--backlog is required/);
    const enabled = await cli(['endpoints', 'enable', endpointId, '--backlog', 'skip'], as);
    expect(enabled.code, enabled.err).toBe(0);
    expect(enabled.json).toMatchObject({ endpoint: { status: 'enabled' }, requeued: 0, skipped: 150 });
    const replay = ['replay', '--endpoint', endpointId, '--status', 'skipped', '--token', tenantKey];

    const unattended = await cli(replay);
    expect(unattended.code).toBe(1);
    expect(unattended.err).toMatch(/150 deliveries match .*: pass --yes to replay them/);
    const declined = await cli(replay, { answer: false });
    expect(declined.asked).toHaveLength(1);
    expect(declined.asked[0]).toMatch(/^150 deliveries match \(about \d+ s to send\)\. Replay them\?$/);
    expect(declined.code).toBe(1);
    expect((await backlog()).pending).toBe(0);

    const accepted = await cli(replay, { answer: true });
    expect(accepted.code, accepted.err).toBe(0);
    expect(accepted.json).toMatchObject({ count: 150, more: false, rate_per_second: 10 });
    expect(accepted.err).toMatch(/replayed 150/);
    expect((await backlog()).pending).toBe(150);
    // Each delivery is replayed once: asking again finds nothing, and needs no confirmation.
    const twice = await cli([...replay, '--yes']);
    expect(twice.json).toMatchObject({ count: 0, more: false });

    const deliveries = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpointId}/deliveries?status=skipped&limit=1`,
      token: tenantKey,
    });
    const one = await cli(['replay', '--delivery', deliveries.body.data[0].id, '--token', tenantKey]);
    expect(one.code, one.err).toBe(0);
    expect(one.json).toMatchObject({ status: 'pending', replayed_from: deliveries.body.data[0].id });
  });

  it('the binary: tool usage in --help, results on stdout, errors on stderr with their exit codes', async () => {
    const run = promisify(execFile);
    const env = childEnv({ HOOKRAIL_API_URL: api });
    const help = await run(process.execPath, [BIN, '--help'], { env });
    expect(help.stdout).toMatch(/hookrail replay --endpoint/);
    const listed = await run(process.execPath, [BIN, 'tenants', 'list', '--token', ADMIN_TOKEN], { env });
    expect(JSON.parse(listed.stdout).data.map((x: { id: string }) => x.id)).toContain(tenantId);
    const failed = await run(process.execPath, [BIN, 'endpoints', 'get', 'ep_nope', '--token', tenantKey], {
      env,
    }).catch((e) => e as { code: number; stdout: string; stderr: string });
    expect(failed).toMatchObject({ code: 1, stdout: '' });
    expect((failed as { stderr: string }).stderr).toMatch(/^error: not_found: /);
  });

  it('replaces a tenant key: the new one works, the old one stops', async () => {
    const other = await cli(['tenants', 'create', '--name', 'Other Inc', '--token', ADMIN_TOKEN]);
    expect(other.code, other.err).toBe(0);
    const oldKey = other.json.tenant_key as string;
    expect((await cli(['endpoints', 'list', '--token', oldKey])).code).toBe(0);
    const replaced = await cli(['tenants', 'replace-key', other.json.id, '--token', ADMIN_TOKEN]);
    expect(replaced.code, replaced.err).toBe(0);
    expect(replaced.json).toMatchObject({
      tenant_id: other.json.id,
      tenant_key: expect.stringMatching(/^hkt_/),
    });
    expect((await cli(['endpoints', 'list', '--token', replaced.json.tenant_key])).code).toBe(0);
    const refused = await cli(['endpoints', 'list', '--token', oldKey]);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/^error: unauthorized: /);
    expect((await cli(['tenants', 'replace-key', '--token', ADMIN_TOKEN])).code).toBe(2);
  });
});
