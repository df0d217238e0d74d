/**
 * What startHookrail refuses before it starts anything: a SQLite store (the configuration's) runs every role in one
 * process, and only one process at a time works on it. The cross-process case is in test/e2e/processes.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StoreInUseError } from '../adapters/sqlite/owner-lock.ts';
import { ConfigError, loadConfig } from '../config/config.ts';
import { type Hookrail, startHookrail } from './start.ts';

const dirs: string[] = [];
const running: Hookrail[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((h) => h.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const start = async (dataDir: string, env: Record<string, string> = {}) => {
  const config = loadConfig({
    HOOKRAIL_DATA_DIR: dataDir,
    HOOKRAIL_ADMIN_TOKEN: 'hka_start_test_token',
    ...env,
  });
  const h = await startHookrail({ config, logger: false, listen: false, startWorkers: false });
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
    const config = loadConfig({ HOOKRAIL_DATA_DIR: dir, HOOKRAIL_ADMIN_TOKEN: 'hka_start_test_token' });
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
