/**
 * PostgreSQL helpers for tests. Each test file (or test) works in its own schema of the shared `test` database,
 * so files run in parallel without seeing each other's rows and nothing has to be truncated.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

/** DATABASE_URL when the developer or CI set one; otherwise the throwaway server of test/support/global-setup.ts. */
export function postgresUrl(): string {
  const url = process.env.DATABASE_URL || inject('postgresUrl');
  if (!url)
    throw new Error('no PostgreSQL: set DATABASE_URL or run through vitest (global setup starts one)');
  return url;
}

/** Unique, lowercase (valid unquoted identifier and search_path entry), well under PostgreSQL's 63-byte limit. */
export function freshSchemaName(prefix = 't'): string {
  return `hr_${prefix}_${process.pid}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
}

export async function dropSchema(url: string, name: string): Promise<void> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`refusing to drop schema ${JSON.stringify(name)}`);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
  } finally {
    await client.end();
  }
}
