/**
 * A Hookrail instance for tests, built in-process without listening, on SQLite (a file of its own) or PostgreSQL
 * (a schema of its own). `request` wraps `app.inject()`.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GuardedDestinationChecker } from '../../src/adapters/http/destination-checker.ts';
import { createPostgresStore } from '../../src/adapters/postgres/postgres-store.ts';
import { createSqliteStore } from '../../src/adapters/sqlite/sqlite-store.ts';
import type { AuditActor } from '../../src/app/audit.ts';
import { type Hookrail, startHookrail } from '../../src/bootstrap/start.ts';
import { loadConfig, type Role } from '../../src/config/config.ts';
import { base32Encode, totpCode } from '../../src/domain/totp.ts';
import type { Clock } from '../../src/ports/clock.ts';
import type { Store } from '../../src/ports/store.ts';
import { openApiMismatch } from './openapi-check.ts';
import { dropSchema, freshSchemaName, postgresUrl } from './postgres.ts';

export type StoreKind = 'sqlite' | 'postgres';
export const STORE_KINDS: StoreKind[] = ['sqlite', 'postgres'];

export const ADMIN_TOKEN = 'hka_test_operator_token';
/** The operator's step-up TOTP seed of createTestApp's instances (20 bytes of 9). */
export const ADMIN_TOTP_SEED = Buffer.alloc(20, 9);

/**
 * An operator step-up token from `t` (for deleting a tenant), with the code of `nowMs` (the app's clock). Each TOTP
 * step is accepted once: a second call within the same 30 s step needs a later `nowMs`.
 */
export async function operatorStepUp(t: TestApp, nowMs = Date.now()): Promise<string> {
  const r = await t.request({
    method: 'POST',
    url: '/v1/auth/step-up',
    body: { totp: totpCode(ADMIN_TOTP_SEED, nowMs) },
  });
  if (r.status !== 200) throw new Error(`operator step-up: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.token;
}

/** A tenant's key as the author of a change made by calling a use case directly (its audit record's actor). */
export const asTenant = (tenantId: string): AuditActor => ({
  tenantId,
  principal: { kind: 'tenant', keyId: 'key_test', tenantId },
});

export interface TestStore {
  store: Store;
  destroy(): Promise<void>;
}

export async function createTestStore(kind: StoreKind): Promise<TestStore> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'hookrail-test-'));
    const store = createSqliteStore({ filename: join(dir, 'hookrail.db') });
    await store.migrate();
    return {
      store,
      destroy: async () => {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const url = postgresUrl();
  const schema = freshSchemaName();
  const store = createPostgresStore({ connectionString: url, schema });
  await store.migrate();
  return {
    store,
    destroy: async () => {
      await store.close();
      await dropSchema(url, schema);
    },
  };
}

export interface TestApp {
  hookrail: Hookrail;
  store: Store;
  request(opts: {
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
    url: string;
    token?: string | null;
    body?: unknown;
    rawBody?: string | Buffer;
    headers?: Record<string, string>;
  }): Promise<{ status: number; body: any; headers: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function createTestApp(
  kind: StoreKind,
  opts: { clock?: Clock; roles?: Role[]; env?: Record<string, string> } = {},
): Promise<TestApp> {
  const { store, destroy } = await createTestStore(kind);
  const dataDir = mkdtempSync(join(tmpdir(), 'hookrail-data-'));
  const config = loadConfig({
    HOOKRAIL_DATA_DIR: dataDir,
    HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
    HOOKRAIL_ADMIN_TOTP_SEED: base32Encode(ADMIN_TOTP_SEED),
    HOOKRAIL_ROLES: (opts.roles ?? ['intake', 'control']).join(','),
    HOOKRAIL_AUTH_CACHE_MS: '0',
    ...opts.env,
  });
  // Names in tests resolve to a documentation-free public address; IP literals are checked as they are.
  const destinations = new GuardedDestinationChecker({
    allowNetworks: config.allowNetworks,
    resolver: { resolve: async () => ['93.184.215.14'] },
  });
  const hookrail = await startHookrail({
    config,
    store,
    logger: false,
    listen: false,
    destinations,
    ...(opts.clock ? { clock: opts.clock } : {}),
  });
  const app = hookrail.app;
  if (!app) throw new Error('no HTTP roles');
  return {
    hookrail,
    store,
    async request({ method, url, token = ADMIN_TOKEN, body, rawBody, headers = {} }) {
      const h: Record<string, string> = { ...headers };
      if (token) h.authorization = `Bearer ${token}`;
      let payload: string | Buffer | undefined = rawBody;
      if (body !== undefined) {
        payload = JSON.stringify(body);
        h['content-type'] ??= 'application/json';
      }
      const res = await app.inject({ method, url, headers: h, payload });
      let parsed: unknown = res.body;
      try {
        parsed = res.body ? JSON.parse(res.body) : null;
      } catch {}
      const mismatch = openApiMismatch(method, url, res.statusCode, parsed);
      if (mismatch) throw new Error(mismatch);
      return { status: res.statusCode, body: parsed, headers: res.headers };
    },
    async close() {
      await hookrail.close();
      await destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
