/**
 * The statements that run with a plan made once per connection (generic plans; withPlansOncePerConnection in
 * query-helpers.ts) must reach every table through an index, whatever the tables' sizes when the plan is made: a plan
 * made while a table is small and cached for the connection's life must not scan it once it is large. Checked
 * where the risk is greatest: on freshly migrated, empty tables, without statistics, where a scan looks cheapest.
 *
 * The keyed writes that end the lease and the completion are planned per call instead, with their keys as constants;
 * they must probe `deliveries` by its primary key on a young table without statistics too (KEYED_WRITES).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropSchema, freshSchemaName, postgresUrl } from '../../../test/support/postgres.ts';
import { complete } from './completion.ts';
import { lease, pickDue } from './lease.ts';
import type { TxRunner } from './migrate.ts';
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

/** The texts `run` sends through a transaction whose statements all return no rows. */
async function statementsOf(run: (tx: TxRunner) => Promise<unknown>): Promise<string[]> {
  return (await sentBy(run, () => [])).map((s) => s.text);
}

/** The statements `run` sends through a transaction whose statements return `rowsFor(text)`. */
async function sentBy(
  run: (tx: TxRunner) => Promise<unknown>,
  rowsFor: (text: string) => unknown[],
): Promise<Array<{ text: string; values?: unknown[] }>> {
  const sent: Array<{ text: string; values?: unknown[] }> = [];
  const c = {
    query: async (text: string, values?: unknown[]) => {
      sent.push({ text, values });
      return { rows: rowsFor(text) };
    },
  };
  await run((async (fn: (client: typeof c) => Promise<unknown>) => fn(c)) as unknown as TxRunner);
  return sent;
}

/** The text pickDue sends, captured without running it. */
async function pickDueText(withEvent: boolean): Promise<string> {
  const cands = [
    { endpoint_id: 'ep_a', ordering: 'none' as const },
    { endpoint_id: 'ep_b', ordering: 'endpoint' as const },
    { endpoint_id: 'ep_c', ordering: 'resource' as const },
  ];
  const [text] = await statementsOf((tx) => tx((c) => pickDue(c, cands, [10, 1, 10], 0, 512, withEvent)));
  return text!;
}

/** The generic plan PostgreSQL makes for `text` (its parameters' values do not enter it). */
async function genericPlan(text: string): Promise<string> {
  const params = Math.max(...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  await client.query('DEALLOCATE ALL');
  await client.query(`PREPARE s AS ${text}`);
  await client.query('SET plan_cache_mode = force_generic_plan');
  try {
    const r = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN EXECUTE s(${Array.from({ length: params }, () => 'NULL').join(', ')})`,
    );
    return r.rows.map((x) => x['QUERY PLAN']).join('\n');
  } finally {
    await client.query('RESET plan_cache_mode');
  }
}

const TABLES =
  /(Seq Scan|Bitmap Heap Scan) on (deliveries|events|endpoints|tenants|attempts|endpoint_queue)\b/;

describe('plans made once per connection', () => {
  it('pickDue reaches deliveries and events only through their indexes, one probe per row', async () => {
    const plan = await genericPlan(await pickDueText(true));
    expect(plan).toMatch(/\$4/); // a generic plan: parameters, not values
    expect(plan).not.toMatch(TABLES);
    expect(plan).not.toMatch(/Hash (Join|Semi Join|Anti Join)/);
    expect(plan).toMatch(/Index Scan using events_pkey on events/);
    expect(plan).toMatch(/Index Scan using deliveries_ready on deliveries/);
    expect(plan).toMatch(/Index Scan using deliveries_head on deliveries/);
  });

  it("the lease's candidates walk a rotation index in order and probe each endpoint", async () => {
    for (const lanes of [
      undefined,
      { shared: 'all' as const, dedicated: true },
      { shared: [3], dedicated: false },
    ]) {
      const texts = await statementsOf((tx) => lease(tx, 'w1', 0, 100, 10, 60_000, lanes));
      expect(texts[0]).toBe('SET LOCAL plan_cache_mode = force_generic_plan');
      const plan = await genericPlan(texts[1]!);
      // A binding of two lanes reads both partial rotation indexes (a BitmapOr) and sorts what is due in them,
      // with custom plans too; never the whole queue.
      expect(plan).not.toMatch(/Seq Scan on/);
      expect(plan).toMatch(/Index Scan on endpoint_queue_rotation|Index Scan using endpoint_queue_rotation/);
      expect(plan).toMatch(/Index Scan using endpoints_pkey on endpoints/);
    }
  });

  it("completion's append and read reaches endpoints, tenants and deliveries by key probes only", async () => {
    const texts = await statementsOf((tx) => complete(tx, [completionOf()], 0, undefined));
    const text = texts.find((t) => t.includes('WITH appended AS'));
    expect(text).toBeDefined();
    expect(texts[texts.indexOf(text!) - 1]).toBe('SET LOCAL plan_cache_mode = force_generic_plan');
    const plan = await genericPlan(text!);
    expect(plan).not.toMatch(TABLES);
    expect(plan).toMatch(/Index Scan using endpoints_pkey on endpoints/);
    expect(plan).toMatch(/Index Scan using tenants_pkey on tenants/);
    expect(plan).toMatch(/Index Scan using deliveries_pkey on deliveries/);
  });
});

describe('keyed writes, planned per call', () => {
  const KEYS = 400;
  const ids = Array.from({ length: KEYS }, (_, i) => `dlv_${i + 1}`);
  const row = (id: string) => ({
    id,
    tenant_id: 'ten_1',
    endpoint_id: 'ep_1',
    event_id: `evt_${id}`,
    event_type: 't',
    resource_id: null,
    webhook_id: `msg_${id}`,
    status: 'pending',
    attempts: 0,
    next_attempt_at: 0,
    first_attempt_at: null,
    last_attempt_at: null,
    status_reason: null,
    replayed_from: null,
    lease_owner: 'w1',
    lease_until: 60_000,
    created_at: 0,
    updated_at: 0,
  });

  beforeAll(async () => {
    // A young table without statistics, a few times larger than the batch: where a scan looks cheapest to the
    // planner (in bench:delivery the scans were seen at a few thousand deliveries).
    await client.query(
      `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, webhook_id, status,
                               next_attempt_at, created_at, updated_at)
       SELECT 'dlv_' || i, 'ten_1', 'ep_1', 'evt_' || i, i, 't', 'msg_' || i, 'pending', 0, 0, 0
         FROM generate_series(1, 2000) i`,
    );
  });

  /** The plan of the statement at `at` in `sent`, after the settings sent before it in the same transaction. */
  async function planAt(sent: Array<{ text: string; values?: unknown[] }>, at: number, settings = true) {
    await client.query('BEGIN');
    try {
      await client.query('SET LOCAL plan_cache_mode = force_custom_plan'); // as on Hookrail's connections
      if (settings)
        for (const s of sent.slice(0, at)) if (s.text.startsWith('SET LOCAL')) await client.query(s.text);
      const r = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sent[at]!.text}`, sent[at]!.values);
      return r.rows.map((x) => x['QUERY PLAN']).join('\n');
    } finally {
      await client.query('ROLLBACK');
    }
  }

  it("the lease's mark and the completion's projection write probe deliveries by key", async () => {
    const leaseSent = await sentBy(
      (tx) => lease(tx, 'w1', 0, KEYS, KEYS, 60_000),
      (text) =>
        text.includes('FROM endpoint_queue q')
          ? [
              {
                endpoint_id: 'ep_1',
                inflight: 0,
                runtime: null,
                last_served_at: 0,
                max_concurrency: 1000,
                ordering: 'none',
                url: 'https://example.com/',
                headers: '{}',
                tenant_id: 'ten_1',
              },
            ]
          : text.includes('WITH cand AS')
            ? ids.map((id) => ({ ...row(id), ev_data: '{}', ev_created_at: 0 }))
            : [],
    );
    const completeSent = await sentBy(
      (tx) =>
        complete(
          tx,
          ids.map((_, i) => completionOf(i + 1)),
          0,
          undefined,
        ),
      (text) =>
        text.includes('FOR UPDATE')
          ? [{ endpoint_id: 'ep_1', runtime: null }]
          : text.includes('WITH appended AS')
            ? ids.map((id) => ({
                ...row(id),
                ep_id: 'ep_1',
                ep_status: 'enabled',
                ep_url: 'https://example.com/',
                ep_tenant_id: 'ten_1',
                notification_email: null,
              }))
            : [],
    );
    for (const sent of [leaseSent, completeSent]) {
      const at = sent.findIndex((s) => /UPDATE deliveries/.test(s.text));
      expect(at).toBeGreaterThan(0);
      const plan = await planAt(sent, at);
      expect(plan).not.toMatch(/Seq Scan on (deliveries|endpoints)\b/);
      expect(plan).toMatch(/Index Scan (using|on) deliveries_pkey\b/);
      // Without the settings the planner scans the table: what the check above guards against.
      expect(await planAt(sent, at, false)).toMatch(/Seq Scan on deliveries\b/);
    }
  });
});

function completionOf(n = 1): Parameters<typeof complete>[1][number] {
  return {
    leaseOwner: 'w1',
    next: { status: 'delivered' },
    attempt: {
      id: `att_${n}`,
      deliveryId: `dlv_${n}`,
      endpointId: 'ep_1',
      tenantId: 'ten_1',
      attemptNo: 1,
      url: 'https://example.com/',
      dueAt: 0,
      startedAt: 0,
      finishedAt: 1,
      outcome: 'delivered',
      statusCode: 204,
      errorClass: null,
      errorMessage: null,
      request: { hops: [] },
      responseHeaders: null,
      responseBody: null,
      queueMs: 0,
      platformMs: 0,
      consumerMs: 1,
    },
  } as Parameters<typeof complete>[1][number];
}
