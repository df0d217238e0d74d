/**
 * The statements that run with a plan made once per connection (generic plans; see pickDueOncePlanned in
 * lease.ts) must reach every table through an index, whatever the tables' sizes when the plan is made: a plan
 * made while a table is small and cached for the connection's life must not scan it once it is large. Checked
 * where the risk is greatest: on freshly migrated, empty tables, without statistics, where a scan looks cheapest.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropSchema, freshSchemaName, postgresUrl } from '../../../test/support/postgres.ts';
import { pickDue } from './lease.ts';
import { createPostgresStore } from './postgres-store.ts';

const schema = freshSchemaName('plans');
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

/** The text pickDue sends, captured without running it. */
async function pickDueText(withEvent: boolean): Promise<string> {
  let text = '';
  const capture = {
    query: async (t: string) => {
      text = t;
      return { rows: [] };
    },
  };
  const cands = [
    { endpoint_id: 'ep_a', ordering: 'none' as const },
    { endpoint_id: 'ep_b', ordering: 'endpoint' as const },
    { endpoint_id: 'ep_c', ordering: 'resource' as const },
  ];
  await pickDue(capture as never, cands, [10, 1, 10], 0, 512, withEvent);
  return text;
}

async function genericPlan(text: string, args: string): Promise<string> {
  await client.query('DEALLOCATE ALL');
  await client.query(`PREPARE s AS ${text}`);
  await client.query('SET plan_cache_mode = force_generic_plan');
  try {
    const r = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE s(${args})`);
    return r.rows.map((x) => x['QUERY PLAN']).join('\n');
  } finally {
    await client.query('RESET plan_cache_mode');
  }
}

describe('plans made once per connection', () => {
  it('pickDue reaches deliveries and events only through their indexes, one probe per row', async () => {
    const plan = await genericPlan(
      await pickDueText(true),
      `ARRAY['ep_a','ep_b','ep_c'], ARRAY[10,1,10], ARRAY[false,true,false], 0, 512, ARRAY[false,false,true]`,
    );
    // A generic plan (parameters, not the values above), made on empty tables.
    expect(plan).toMatch(/\$4/);
    expect(plan).not.toMatch(/Seq Scan on (deliveries|events)\b/);
    expect(plan).not.toMatch(/Hash (Join|Semi Join|Anti Join)/);
    expect(plan).toMatch(/Index Scan using events_pkey on events/);
    expect(plan).toMatch(/Index Scan using deliveries_ready on deliveries/);
    expect(plan).toMatch(/Index Scan using deliveries_head on deliveries/);
  });
});
