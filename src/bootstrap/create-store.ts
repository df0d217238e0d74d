import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createPostgresStore } from '../adapters/postgres/postgres-store.ts';
import { createSqliteStore } from '../adapters/sqlite/sqlite-store.ts';
import type { Config } from '../config/config.ts';
import type { Store } from '../ports/store.ts';

/** SQLite in the data directory unless DATABASE_URL selects PostgreSQL. */
export function createStore(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Store {
  if (config.databaseUrl) return createPostgresStore({ connectionString: config.databaseUrl });
  mkdirSync(config.dataDir, { recursive: true });
  return createSqliteStore({ filename: join(config.dataDir, 'hookrail.db') });
}
