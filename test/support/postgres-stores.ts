/**
 * PostgreSQL stores for the adapter's own tests (postgres-store.test.ts, postgres-availability.test.ts): each opened
 * store is closed after its test, each schema dropped after the file, and the event and failure helpers both use.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, expect } from 'vitest';
import { createPostgresStore } from '../../src/adapters/postgres/postgres-store.ts';
import { newId } from '../../src/domain/ids.ts';
import { type NewEvent, type Store, StoreUnavailableError } from '../../src/ports/store.ts';
import { dropSchema, freshSchemaName, postgresUrl } from './postgres.ts';

export const NOW = Date.UTC(2025, 0, 1);
export const WINDOW = 24 * 3_600_000;

/** Registers the cleanup hooks in the calling test file; returns the store and schema factories. */
export function postgresStores() {
  const stores: Store[] = [];
  const schemas: string[] = [];
  const open = (opts: { schema: string; url?: string; logger?: unknown; poolSize?: number }): Store => {
    const { url, ...rest } = opts;
    const s = createPostgresStore({ connectionString: url ?? postgresUrl(), ...rest });
    stores.push(s);
    return s;
  };
  const schema = (): string => {
    const name = freshSchemaName('pg');
    schemas.push(name);
    return name;
  };
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    for (const s of schemas) await dropSchema(postgresUrl(), s);
  });
  return { open, schema };
}

export function event(tenantId: string, key: string | null, i = 0): NewEvent {
  return {
    id: newId('event', NOW + i, randomBytes(10)),
    tenantId,
    type: 'order.created',
    resourceId: null,
    data: JSON.stringify({ i }),
    idempotencyKey: key,
    requestHash: key === null ? null : `hash-of-${key}`,
    createdAt: NOW + i,
  };
}

export async function expectUnavailable(p: Promise<unknown>): Promise<void> {
  await expect(p).rejects.toBeInstanceOf(StoreUnavailableError);
}
