/**
 * The queue rebuild holds an endpoint's queue row while it reads, so its read must stay small whatever the tables
 * hold: the endpoint's leases through deliveries_leased (the leased rows only) and its due time through
 * deliveries_ready, never a walk of all the endpoint's deliveries or a scan of the table. Checked as plan-shapes.test.ts
 * does: the generic plan of a PROBES_ONLY transaction on freshly migrated, empty tables without statistics.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { dropSchema, freshSchemaName, postgresUrl } from '../../../test/support/postgres.ts';
import { createPostgresStore } from './postgres-store.ts';
import { PROBES_ONLY } from './query-helpers.ts';
import { REBUILT } from './queue-rebuild.ts';

const schema = freshSchemaName('rebuild');
let client: pg.Client;

beforeAll(async () => {
  const store = createPostgresStore({ connectionString: postgresUrl(), schema });
  await store.migrate();
  await store.close();
  client = new pg.Client({ connectionString: postgresUrl() });
  await client.connect();
  await client.query(`SET search_path TO "${schema}"`);
});
afterAll(async () => {
  await client?.end();
  await dropSchema(postgresUrl(), schema);
});

it('reads leases through deliveries_leased and the due time through deliveries_ready only', async () => {
  await client.query(`BEGIN; ${PROBES_ONLY}`);
  let plan: string;
  try {
    await client.query(`PREPARE rebuilt AS ${REBUILT}`);
    const r = await client.query<{ 'QUERY PLAN': string }>('EXPLAIN EXECUTE rebuilt(NULL)');
    plan = r.rows.map((x) => x['QUERY PLAN']).join('\n');
  } finally {
    await client.query('ROLLBACK');
  }
  expect(plan).toMatch(/Index Scan on deliveries_leased|Index Scan using deliveries_leased/);
  expect(plan).toMatch(/Scan using deliveries_ready on deliveries/);
  expect(plan).not.toMatch(/deliveries_endpoint|Seq Scan/);
});
