/**
 * Hookrail as an operator runs it: several processes on one PostgreSQL schema (PRODUCT.md §1: any number of stateless
 * processes), graceful shutdown on SIGTERM, and the CLI's own surface (`--version`, `help`, `migrate`, the operator
 * token printed once, flag errors).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROLES } from '../../src/config/config.ts';
import { base32Decode, totpCode } from '../../src/domain/totp.ts';
import {
  createChildSchema,
  runHookrail,
  spawnHookrail,
  tempDir as tempDirFor,
  useCleanups,
  useHookrailProcesses,
} from '../support/hookrail-process.ts';
import {
  findUnreadable,
  http,
  isConnectionError,
  runLoad,
  type SendRecord,
  setupTenant,
  sleep,
  tally,
} from '../support/intake-load.ts';
import { postgresUrl } from '../support/postgres.ts';

useHookrailProcesses();

const ADMIN_TOKEN = 'hka_e2e_processes_operator_token';
const VERSION: string = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
).version;

const cleanups = useCleanups();
const tempDir = (label: string) => tempDirFor(cleanups, label);

async function freshSchemaUrl(label: string): Promise<string> {
  const s = await createChildSchema(postgresUrl(), label);
  cleanups.push(s.drop);
  return s.url;
}

describe('two intake processes on one PostgreSQL schema', () => {
  it('both accept under concurrent load, both read everything, one Idempotency-Key makes one event', {
    timeout: 60_000,
  }, async () => {
    const url = await freshSchemaUrl('two');
    const env = (n: number) => ({
      HOOKRAIL_ROLES: 'intake,control',
      HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
      HOOKRAIL_DATA_DIR: tempDir(`two-${n}`),
      DATABASE_URL: url,
    });
    // Started together on an empty schema: both migrate it at once.
    const [a, b] = await Promise.all([
      spawnHookrail({ env: env(1), name: 'A' }),
      spawnHookrail({ env: env(2), name: 'B' }),
    ]);
    const { tenantId, producerKey } = await setupTenant(a.url, ADMIN_TOKEN);

    const stop = new AbortController();
    const load = runLoad({
      targets: [a.url, b.url],
      producerKey,
      tenantId,
      concurrency: 16,
      run: 'two-processes',
      signal: stop.signal,
    });
    await sleep(1_500);
    stop.abort();
    const records = await load;
    const byTarget = (t: string) => tally(records.filter((r) => r.target === t));
    expect(byTarget(a.url)).toEqual({ 202: expect.any(Number) });
    expect(byTarget(b.url)).toEqual({ 202: expect.any(Number) });
    expect(new Set(records.map((r) => r.eventId)).size).toBe(records.length);
    for (const reader of [a, b]) {
      const missing = await findUnreadable(reader.url, ADMIN_TOKEN, records, { tenantId });
      expect(missing.slice(0, 5), `${missing.length} unreadable via ${reader.name}`).toEqual([]);
    }

    // The same key sent concurrently to both processes, ten keys in a row: one event per key, never two.
    const perKey: Array<{ key: string; ids: number; created: number; replayed: number }> = [];
    for (let k = 0; k < 10; k++) {
      const key = `order-${k}-${Date.now()}`;
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          http(i % 2 === 0 ? a.url : b.url, {
            path: '/v1/events',
            token: producerKey,
            body: { tenant_id: tenantId, type: 'load.test', data: { seq: k, run: 'idempotency' } },
            headers: { 'idempotency-key': key },
          }),
        ),
      );
      const statuses = answers.map((r) => r.status);
      expect(
        statuses.every((s) => s === 202),
        JSON.stringify(answers.map((r) => r.body)),
      ).toBe(true);
      const ids = new Set(answers.map((r) => r.body.id));
      perKey.push({
        key,
        ids: ids.size,
        created: answers.filter((r) => r.headers['idempotent-replayed'] !== 'true').length,
        replayed: answers.filter((r) => r.headers['idempotent-replayed'] === 'true').length,
      });
      const [id] = ids;
      for (const reader of [a, b]) {
        const got = await http(reader.url, { path: `/v1/events/${id}`, token: ADMIN_TOKEN });
        expect(got.status).toBe(200);
        expect(got.body.data).toEqual({ seq: k, run: 'idempotency' });
      }
    }
    expect(perKey.map(({ ids, created, replayed }) => ({ ids, created, replayed }))).toEqual(
      perKey.map(() => ({ ids: 1, created: 1, replayed: 11 })),
    );
    console.log(
      `[processes] two processes: ${records.length} x 202 (A ${byTarget(a.url)[202]}, B ${byTarget(b.url)[202]}), ` +
        'all readable via both; 10 keys x 12 concurrent sends → 1 event each',
    );
    await Promise.all([a.kill('SIGTERM'), b.kill('SIGTERM')]);
  });
});

describe('step-up across two API processes on one PostgreSQL schema', () => {
  it('a TOTP code is accepted once, and wrong codes count against one budget per tenant', {
    timeout: 60_000,
  }, async () => {
    const url = await freshSchemaUrl('stepup');
    const masterKey = randomBytes(32).toString('base64'); // both open the tenant's sealed TOTP seed
    const env = (n: number) => ({
      HOOKRAIL_ROLES: 'intake,control',
      HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
      HOOKRAIL_MASTER_KEY: masterKey,
      HOOKRAIL_DATA_DIR: tempDir(`stepup-${n}`),
      DATABASE_URL: url,
    });
    const a = await spawnHookrail({ env: env(1), name: 'A' });
    const b = await spawnHookrail({ env: env(2), name: 'B' });
    const tenant = await http(a.url, { path: '/v1/tenants', token: ADMIN_TOKEN, body: { name: 'step-up' } });
    expect(tenant.status).toBe(201);
    const seed = base32Decode(tenant.body.step_up.totp_seed);
    const stepUp = (base: string, totp: string) =>
      http(base, { path: '/v1/auth/step-up', token: tenant.body.tenant_key, body: { totp } });

    // One code sent to both at once: one process accepts it, the other refuses it as used.
    const code = totpCode(seed, Date.now());
    const both = await Promise.all([stepUp(a.url, code), stepUp(b.url, code)]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 403]);
    expect(both.find((r) => r.status === 403)!.body.error.code).toBe('invalid_totp');

    // Wrong codes, alternating between the processes: the budget (5 in 5 minutes) is the tenant's, so the sixth try
    // at the latest is refused, and then both refuse. (Kept per process, 6 alternating tries would all be 403.)
    const wrong = String((Number(code) + 500_000) % 1_000_000).padStart(6, '0');
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await stepUp(i % 2 === 0 ? a.url : b.url, wrong)).status);
    expect(statuses).toContain(429);
    expect(statuses.filter((s) => s === 403).length).toBeLessThanOrEqual(5);
    for (const base of [a.url, b.url]) {
      const limited = await stepUp(base, totpCode(seed, Date.now() + 30_000));
      expect(limited.status).toBe(429);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    }
    await Promise.all([a.kill('SIGTERM'), b.kill('SIGTERM')]);
  });
});

/** Hookrail under 32 producers, SIGTERMed 300–700 ms in; the load keeps knocking for 500 ms after the exit. */
async function sigtermUnderLoad(kind: 'sqlite' | 'postgres') {
  const env: Record<string, string> = {
    HOOKRAIL_ROLES: kind === 'sqlite' ? ROLES.join(',') : 'intake,control',
    HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
    HOOKRAIL_DATA_DIR: tempDir(`sigterm-${kind}`),
  };
  if (kind === 'postgres') env.DATABASE_URL = await freshSchemaUrl('sigterm');
  const proc = await spawnHookrail({ env, name: `${kind} (SIGTERM)` });
  const { tenantId, producerKey } = await setupTenant(proc.url, ADMIN_TOKEN);

  const stop = new AbortController();
  const load = runLoad({
    targets: [proc.url],
    producerKey,
    tenantId,
    concurrency: 32,
    run: `sigterm-${kind}`,
    signal: stop.signal,
    // Keep knocking after the shutdown (with a short pause) to see how late requests are answered.
    backoffMs: 50,
    timeoutMs: 5_000,
  });
  await sleep(300 + Math.random() * 400);
  const termAt = performance.now();
  proc.child.kill('SIGTERM');
  const exit = await Promise.race([proc.exited, sleep(10_000).then(() => null)]);
  const exitMs = performance.now() - termAt;
  await sleep(500);
  stop.abort();
  const records = await load;
  return { env, proc, tenantId, records, termAt, exit, exitMs };
}

describe.each(['sqlite', 'postgres'] as const)('SIGTERM under load (%s)', (kind) => {
  it('exits 0 within seconds, keeps every 202, and turns later requests away without hanging', {
    timeout: 60_000,
  }, async () => {
    const { env, proc, tenantId, records, termAt, exit, exitMs } = await sigtermUnderLoad(kind);
    expect(exit, `no exit within 10 s of SIGTERM\n${proc.output()}`).not.toBeNull();
    expect(exit).toEqual({ code: 0, signal: null });
    expect(exitMs).toBeLessThan(5_000);
    expect(proc.stdout).toContain('SIGTERM: stopping');

    const after = records.filter((r) => r.startedAt >= termAt);
    const fine = (r: SendRecord) =>
      r.status === 202 || r.status === 503 || (r.errorCode !== null && isConnectionError(r.errorCode));
    // Nothing hangs (the load's per-request timeout is 5 s) and nothing but 202, 503 or a refused/closed connection.
    expect(
      records.filter((r) => !fine(r)).map((r) => ({ status: r.status, error: r.errorCode, body: r.body })),
    ).toEqual([]);
    expect(after.length).toBeGreaterThan(0);
    const after503 = after.filter((r) => r.status === 503);
    const slowest = Math.max(...records.map((r) => r.endedAt - r.startedAt));

    const accepted = records.filter((r) => r.status === 202);
    expect(accepted.length).toBeGreaterThan(0);
    const again = await spawnHookrail({ env, name: `${kind} (after SIGTERM)` });
    const missing = await findUnreadable(again.url, ADMIN_TOKEN, accepted, { tenantId });
    expect(missing.slice(0, 5), `${missing.length} of ${accepted.length} unreadable`).toEqual([]);
    await again.kill('SIGTERM');

    console.log(
      `[processes] SIGTERM ${kind}: exit ${exit?.code} after ${Math.round(exitMs)} ms; ${accepted.length} x 202 ` +
        `all readable after restart; requests started after SIGTERM: ${JSON.stringify(tally(after))}; ` +
        `slowest request ${Math.round(slowest)} ms` +
        (after503[0]
          ? `; a 503 during shutdown: retry-after=${after503[0].retryAfter} body=${JSON.stringify(after503[0].body)}`
          : ''),
    );
  });
});

/**
 * While closing, a request that still reaches the process (on a connection that was busy when the close began)
 * is answered 503 `shutting_down` with Retry-After, in the API's error format. Whether any request lands in that
 * window depends on timing, so this checks every such answer rather than requiring one.
 */
it('SIGTERM: any 503 while shutting down is in the error format, with Retry-After', {
  timeout: 60_000,
}, async () => {
  const { records, termAt } = await sigtermUnderLoad('sqlite');
  const refused = records.filter((r) => r.startedAt >= termAt && r.status === 503);
  for (const r of refused) {
    expect({ body: r.body, retryAfter: Number(r.retryAfter) > 0 }).toEqual({
      body: { error: { code: 'shutting_down', message: expect.any(String) } },
      retryAfter: true,
    });
  }
});

describe('CLI', () => {
  it('--version, help, and exit codes for no command and an unknown command', async () => {
    const [version, help, none, unknown] = await Promise.all([
      runHookrail(['--version']),
      runHookrail(['help']),
      runHookrail([]),
      runHookrail(['frobnicate']),
    ]);
    expect(version).toMatchObject({ code: 0, stdout: `${VERSION}\n` });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain(`hookrail ${VERSION}`);
    expect(help.stdout).toMatch(/Usage:[\s\S]*hookrail start[\s\S]*hookrail migrate/);
    expect(none.code).toBe(2);
    expect(none.stdout).toContain('Usage:');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "frobnicate"');
  });

  it('bad flags and bad settings exit non-zero with a clear message and start nothing', async () => {
    const dataDir = tempDir('cli-bad');
    const cases: Array<{ args: string[]; env?: Record<string, string>; message: RegExp }> = [
      { args: ['start', '--bogus', '1'], message: /configuration error: unknown flag --bogus/ },
      { args: ['start', '--port', 'eighty'], message: /configuration error: invalid port "eighty"/ },
      { args: ['start', '--port'], message: /configuration error: --port needs a value/ },
      { args: ['start', 'extra'], message: /configuration error: unexpected argument "extra"/ },
      { args: ['start', '--roles', 'intake,nonsense'], message: /unknown role "nonsense"/ },
      {
        args: ['migrate', '--database-url', 'mysql://x'],
        message: /DATABASE_URL must be a postgres:\/\/ URL/,
      },
    ];
    const results = await Promise.all(
      cases.map((c) => runHookrail(c.args, { env: { HOOKRAIL_DATA_DIR: dataDir, ...c.env } })),
    );
    for (const [i, r] of results.entries()) {
      const c = cases[i]!;
      expect(r.code, `${c.args.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toMatch(c.message);
      expect(r.stdout).not.toContain('listening on');
    }
  });

  it('migrate prepares a fresh SQLite data dir, and a fresh PostgreSQL schema', async () => {
    const dataDir = join(tempDir('cli-migrate'), 'nested', 'data');
    const first = await runHookrail(['migrate', '--data-dir', dataDir]);
    expect(first, first.stderr).toMatchObject({ code: 0, stdout: 'migrated (sqlite)\n' });
    expect(statSync(join(dataDir, 'hookrail.db')).size).toBeGreaterThan(0);
    // Idempotent.
    expect(await runHookrail(['migrate'], { env: { HOOKRAIL_DATA_DIR: dataDir } })).toMatchObject({
      code: 0,
    });

    const url = await freshSchemaUrl('migrate');
    const pgRun = await runHookrail(['migrate'], { env: { DATABASE_URL: url } });
    expect(pgRun, pgRun.stderr).toMatchObject({ code: 0, stdout: 'migrated (postgres)\n' });
  });

  it('start without HOOKRAIL_ADMIN_TOKEN prints a generated operator token once, it keeps working, and the data directory is one process’s', {
    timeout: 40_000,
  }, async () => {
    const dataDir = tempDir('cli-token');
    const env = { HOOKRAIL_DATA_DIR: dataDir };
    const first = await spawnHookrail({ env, name: 'first start' });
    const printed = [...first.stdout.matchAll(/\bhka_[A-Za-z0-9_-]{20,}/g)].map((m) => m[0]);
    expect(printed).toHaveLength(1);
    const token = printed[0]!;
    expect(first.stdout).toContain('Operator token (shown once');
    const stored = join(dataDir, 'admin-token');
    expect(readFileSync(stored, 'utf8').trim()).toBe(token);
    expect(statSync(stored).mode & 0o777).toBe(0o600);
    expect((await http(first.url, { path: '/v1/tenants', token })).status).toBe(200);
    expect((await http(first.url, { path: '/v1/tenants', token: 'hka_wrong' })).status).toBe(401);
    // The operator's step-up seed, printed once and kept beside the token: its code deletes a tenant.
    const seedText = /Operator step-up seed[^\n]*\n\n {2}([A-Z2-7]+)\n/.exec(first.stdout)?.[1];
    expect(seedText).toMatch(/^[A-Z2-7]{32}$/);
    const seedFile = join(dataDir, 'admin-totp-seed');
    expect(readFileSync(seedFile, 'utf8').trim().replace(/=+$/, '')).toBe(seedText);
    expect(statSync(seedFile).mode & 0o777).toBe(0o600);
    const doomed = await http(first.url, { path: '/v1/tenants', token, body: { name: 'doomed' } });
    const totp = totpCode(base32Decode(seedText!), Date.now());
    const stepUp = await http(first.url, { path: '/v1/auth/step-up', token, body: { totp } });
    expect(stepUp.status).toBe(200);
    const deleted = await http(first.url, {
      method: 'DELETE',
      path: `/v1/tenants/${doomed.body.id}`,
      token,
      headers: { 'x-step-up-token': stepUp.body.token },
    });
    expect(deleted.status).toBe(204);
    expect(await first.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    // The token must not leak into logs on the way out either.
    expect(first.stderr).not.toContain(token);

    const second = await spawnHookrail({ env, name: 'second start' });
    expect(second.stdout).not.toMatch(/hka_|Operator token|step-up seed/);
    const tenant = await http(second.url, { path: '/v1/tenants', token, body: { name: 'after restart' } });
    expect(tenant.status).toBe(201);
    // A third process on the same SQLite data directory is refused while the second runs (it would take back the
    // second's leases), and so is one with only some of the roles; the second keeps working.
    for (const extra of [{}, { HOOKRAIL_ROLES: 'intake,control', HOOKRAIL_DATA_DIR: tempDir('cli-roles') }]) {
      const refused = await runHookrail(['start'], { env: { ...env, HOOKRAIL_PORT: '0', ...extra } });
      expect(refused.code, refused.stderr).toBe(1);
      expect(refused.stderr).toMatch(
        'HOOKRAIL_ROLES' in extra ? /one process runs every role/ : /another Hookrail process is using/,
      );
    }
    expect((await http(second.url, { path: '/v1/tenants', token })).status).toBe(200);
    expect(await second.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(second.stdout + second.stderr).not.toContain(token);
  });
});
