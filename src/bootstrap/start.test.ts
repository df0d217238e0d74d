/**
 * What startHookrail refuses before it starts anything: a SQLite store (the configuration's) runs every role in one
 * process, and only one process at a time works on it (the cross-process case is in test/e2e/processes.test.ts);
 * and on either store, a master key that cannot open the secrets the store holds.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createChildSchema } from '../../test/support/hookrail-process.ts';
import { captureLog } from '../../test/support/log-capture.ts';
import { postgresUrl } from '../../test/support/postgres.ts';
import { StoreInUseError } from '../adapters/sqlite/owner-lock.ts';
import { type Config, ConfigError, loadConfig } from '../config/config.ts';
import { type Hookrail, startHookrail } from './start.ts';

const TOKEN = 'hka_start_test_token';
const dirs: string[] = [];
const drops: Array<() => Promise<void>> = [];
const running: Array<Hookrail & { config: Config }> = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((h) => h.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  for (const drop of drops.splice(0)) await drop();
});

const start = async (dataDir: string, env: Record<string, string> = {}) => {
  const config = loadConfig({ HOOKRAIL_DATA_DIR: dataDir, HOOKRAIL_ADMIN_TOKEN: TOKEN, ...env });
  const h = Object.assign(
    await startHookrail({ config, logger: false, listen: false, startWorkers: false }),
    {
      config,
    },
  );
  running.push(h);
  return h;
};
const dataDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'hookrail-start-'));
  dirs.push(d);
  return d;
};

describe('startHookrail on SQLite', () => {
  it('refuses a subset of the roles: nothing else could fan out or deliver what it accepts', async () => {
    const err = await start(dataDir(), { HOOKRAIL_ROLES: 'intake,control' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/missing: fanout, delivery, replay, maintenance.*DATABASE_URL/);
  });

  it('refuses a second start on the same data directory until the first has closed', async () => {
    const dir = dataDir();
    const first = await start(dir);
    await expect(start(dir)).rejects.toThrow(StoreInUseError);
    // A start that was refused holds nothing: the first still works, and once it has closed the next one starts.
    const ready = await first.app!.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    await first.close();
    running.splice(running.indexOf(first), 1);
    const again = await start(dir);
    expect((await again.app!.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    // Another data directory is another store.
    await start(dataDir());
  });

  it('a start that fails after the claim lets go of it', async () => {
    const dir = dataDir();
    // Listening on a port that is taken fails after the store is claimed and migrated.
    const config = loadConfig({ HOOKRAIL_DATA_DIR: dir, HOOKRAIL_ADMIN_TOKEN: TOKEN });
    const blocker = (await import('node:net')).createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    try {
      await expect(
        startHookrail({ config: { ...config, port }, logger: false, startWorkers: false }),
      ).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await new Promise((r) => blocker.close(r));
    }
    await start(dir);
  });
});

describe.each(['sqlite', 'postgres'] as const)('startHookrail on %s: the master key', (kind) => {
  it('a key that cannot open the stored secrets is refused at start, naming the cause', async () => {
    const env: Record<string, string> = {};
    if (kind === 'postgres') {
      const schema = await createChildSchema(postgresUrl(), 'mkey');
      drops.push(schema.drop);
      env.DATABASE_URL = schema.url;
    }
    const keyA = randomBytes(32).toString('base64');
    const first = await start(dataDir(), { ...env, HOOKRAIL_MASTER_KEY: keyA });
    // Before any tenant exists there is nothing to check; a tenant seals its step-up seed under the key.
    const tenant = await first.app!.inject({
      method: 'POST',
      url: '/v1/tenants',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      payload: { name: 'sealed under A' },
    });
    expect(tenant.statusCode).toBe(201);
    await first.close();
    running.splice(running.indexOf(first), 1);

    // The same store (SQLite: the same data directory) with another key: refused, and the store is let go.
    const dir = kind === 'sqlite' ? first.config.dataDir : dataDir();
    const err = await start(dir, { ...env, HOOKRAIL_MASTER_KEY: randomBytes(32).toString('base64') }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/cannot open the secrets this store holds.*different master key/);
    // With no key given, a data directory without master.key makes a key of its own (a process of a PostgreSQL
    // deployment not given the key; a SQLite data directory whose key was in the environment): refused the same.
    await expect(start(kind === 'sqlite' ? dir : dataDir(), env)).rejects.toThrow(ConfigError);
    // The right key starts.
    await start(dir, { ...env, HOOKRAIL_MASTER_KEY: keyA });
  });
});

describe('startHookrail: settings it warns about', () => {
  it('a lease shorter than twice the attempt deadline is allowed, and said at start', async () => {
    for (const [leaseMs, warned] of [
      ['5000', true],
      ['60000', false],
    ] as const) {
      const { logger, lines } = captureLog('warn');
      const config = loadConfig({
        HOOKRAIL_DATA_DIR: dataDir(),
        HOOKRAIL_ADMIN_TOKEN: TOKEN,
        HOOKRAIL_LEASE_MS: leaseMs,
      });
      const h = Object.assign(await startHookrail({ config, logger, listen: false, startWorkers: false }), {
        config,
      });
      running.push(h);
      const warning = lines.find((l) => String(l.msg).startsWith('HOOKRAIL_LEASE_MS is below'));
      expect(Boolean(warning), leaseMs).toBe(warned);
      if (warned) expect(warning).toMatchObject({ leaseMs: 5000, attemptTimeoutMs: 15_000 });
    }
  });
});
