/**
 * The delivery plane's key-probe transactions (the lease, the completion, the expiry sweep) run with PROBES_ONLY
 * (query-helpers.ts): plans made once per connection (generic plans), none reading a table whole. Each of their
 * statements must then reach every table through index probes whatever the tables' sizes when the plan is made: a
 * plan made while a table is small and cached for the connection's life must not scan it once it is large. Checked
 * where the risk is greatest: on freshly migrated, empty tables, without statistics, where a scan looks cheapest.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropSchema, freshSchemaName, postgresUrl } from '../../../test/support/postgres.ts';
import { complete, expire } from './completion.ts';
import { LOST } from './delivery-reconstruct.ts';
import { lease, pickDue } from './lease.ts';
import type { TxRunner } from './migrate.ts';
import { createPostgresStore } from './postgres-store.ts';
import { PROBES_ONLY } from './query-helpers.ts';
import { REBUILT } from './queue-rebuild.ts';

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

interface Sent {
  text: string;
  values?: unknown[];
}

/** What `run` sends through one transaction whose statements return `rowsFor(text)`, and whether it asked for PROBES_ONLY. */
async function sentBy(
  run: (tx: TxRunner) => Promise<unknown>,
  rowsFor: (text: string) => unknown[] = () => [],
): Promise<{ sent: Sent[]; probesOnly: boolean[] }> {
  const sent: Sent[] = [];
  const probesOnly: boolean[] = [];
  const c = {
    query: async (text: string, values?: unknown[]) => {
      sent.push({ text, values });
      return { rows: rowsFor(text) };
    },
  };
  await run((async (fn: (client: typeof c) => Promise<unknown>, o?: { probesOnly?: boolean }) => {
    probesOnly.push(o?.probesOnly === true);
    return fn(c);
  }) as unknown as TxRunner);
  return { sent, probesOnly };
}

/** The text pickDue sends, captured without running it. */
async function pickDueText(withEvent: boolean): Promise<string> {
  const cands = [
    { endpoint_id: 'ep_a', ordering: 'none' as const },
    { endpoint_id: 'ep_b', ordering: 'endpoint' as const },
    { endpoint_id: 'ep_c', ordering: 'resource' as const },
  ];
  const { sent } = await sentBy((tx) => tx((c) => pickDue(c, cands, [10, 1, 10], 0, 512, withEvent)));
  return sent[0]!.text;
}

/** The plan `text` gets in a PROBES_ONLY transaction: generic (its parameters' values do not enter it). */
async function genericPlan(text: string): Promise<string> {
  const params = Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  await client.query('DEALLOCATE ALL');
  await client.query(`BEGIN; ${PROBES_ONLY}`);
  try {
    await client.query(`PREPARE s AS ${text}`);
    const r = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN EXECUTE s${params > 0 ? `(${Array.from({ length: params }, () => 'NULL').join(', ')})` : ''}`,
    );
    return r.rows.map((x) => x['QUERY PLAN']).join('\n');
  } finally {
    await client.query('ROLLBACK');
  }
}

const TABLES = /Seq Scan on (deliveries|events|endpoints|tenants|attempts|endpoint_queue|fanout_pending)\b/;

/** Every table read is an index probe: no scan of a table, no join that reads a side whole, no index walked whole. */
function expectProbesOnly(plan: string) {
  expect(plan).not.toMatch(TABLES);
  expect(plan).not.toMatch(/Hash (Join|Semi Join|Anti Join)|Merge (Join|Semi Join|Anti Join)/);
  const nodes = plan.split(/\n(?=\s*->)/);
  for (const node of nodes)
    if (/(Index Scan|Index Only Scan|Bitmap Index Scan)( using| on)/.test(node))
      expect(node).toMatch(/Index Cond:/);
}

const KEYS = 400;
const ids = Array.from({ length: KEYS }, (_, i) => `dlv_${i + 1}`);
const deliveryRow = (id: string) => ({
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

/** Rows that take each transaction to its last statement: one candidate endpoint, KEYS deliveries of it. */
function rowsFor(text: string): unknown[] {
  // The writes first: their texts mention the queue rows the candidates' branch below matches.
  if (text.includes('WITH leased AS') || text.includes('WITH written AS')) return [];
  if (text.includes('FROM endpoint_queue q') && text.includes('last_served_at'))
    return [
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
    ];
  if (text.includes('WITH cand AS'))
    return ids.map((id) => ({ ...deliveryRow(id), ev_data: '{}', ev_created_at: 0 }));
  if (text.includes('WITH appended AS'))
    return ids.map((id) => ({
      ...deliveryRow(id),
      ep_id: 'ep_1',
      ep_status: 'enabled',
      ep_url: 'https://example.com/',
      ep_tenant_id: 'ten_1',
      notification_email: null,
    }));
  if (text.includes('WITH x AS MATERIALIZED')) return [{ endpoint_id: 'ep_1', found: KEYS }];
  if (text.includes('lease_until <= $1')) return ids.map(deliveryRow);
  if (text.includes('FOR UPDATE')) return [{ endpoint_id: 'ep_1', runtime: null }];
  return [];
}

type Run = (tx: TxRunner) => Promise<unknown>;
const leaseRun: Run = (tx) => lease(tx, 'w1', 0, KEYS, KEYS, 60_000);
const completeRun: Run = (tx) =>
  complete(
    tx,
    ids.map((_, i) => completionOf(i + 1)),
    0,
    undefined,
  );
const transactions: Array<[string, Run]> = [
  ['the lease', leaseRun],
  [
    'the lease, bound to two lanes',
    (tx) => lease(tx, 'w1', 0, KEYS, KEYS, 60_000, { shared: 'all', dedicated: true }),
  ],
  [
    'the lease, bound to one shared lane',
    (tx) => lease(tx, 'w1', 0, KEYS, KEYS, 60_000, { shared: [3], dedicated: false }),
  ],
  ['the completion', completeRun],
  ['the expiry sweep', (tx) => expire(tx, 60_000)],
];

describe('key-probe transactions (PROBES_ONLY)', () => {
  it.each(transactions)('%s: every statement reaches its tables by index probes only', async (_, run) => {
    const { sent, probesOnly } = await sentBy(run, rowsFor);
    expect(probesOnly.length).toBeGreaterThan(0);
    expect(probesOnly.every(Boolean)).toBe(true);
    // Each statement up to the last write is reached (the rows above), and none changes a setting.
    expect(sent.length).toBeGreaterThanOrEqual(3);
    expect(sent.some((s) => /UPDATE (deliveries|endpoint_queue)/.test(s.text))).toBe(true);
    for (const s of sent) {
      expect(s.text).not.toMatch(/^\s*SET\b/);
      const plan = await genericPlan(s.text);
      expectProbesOnly(plan);
    }
  });

  it('pickDue probes the partial indexes per endpoint and each event by its key', async () => {
    const plan = await genericPlan(await pickDueText(true));
    expect(plan).toMatch(/\$4/); // a generic plan: parameters, not values
    expect(plan).toMatch(/Index Scan using events_pkey on events/);
    expect(plan).toMatch(/Index Scan using deliveries_ready on deliveries/);
    expect(plan).toMatch(/Index Scan using deliveries_head on deliveries/);
    // Replays through their own small index, not by walking the endpoint's whole ready backlog.
    expect(plan).toMatch(/Index Scan using deliveries_replays_ready on deliveries/);
  });

  it('a replays-only lease finds its endpoints through the replays index', async () => {
    const { sent } = await sentBy((tx) =>
      lease(tx, 'w1', 0, 100, 10, 60_000, undefined, { replaysOnly: true }),
    );
    const plan = await genericPlan(sent[0]!.text);
    expect(plan).toMatch(/deliveries_replays_ready/);
    expect(plan).not.toMatch(/Seq Scan on deliveries/);
  });

  it("the lease's candidates walk a rotation index in order and probe each endpoint", async () => {
    const { sent } = await sentBy((tx) => lease(tx, 'w1', 0, 100, 10, 60_000));
    const plan = await genericPlan(sent[0]!.text);
    expect(plan).toMatch(/Index Scan on endpoint_queue_rotation|Index Scan using endpoint_queue_rotation/);
    expect(plan).toMatch(/Index Scan using endpoints_pkey on endpoints/);
  });

  it("completion's append and read reaches endpoints, tenants and deliveries by key probes", async () => {
    const { sent } = await sentBy((tx) => complete(tx, [completionOf()], 0, undefined), rowsFor);
    const plan = await genericPlan(sent.find((s) => s.text.includes('WITH appended AS'))!.text);
    expect(plan).toMatch(/Index Scan using endpoints_pkey on endpoints/);
    expect(plan).toMatch(/Index Scan using tenants_pkey on tenants/);
    expect(plan).toMatch(/Index Scan using deliveries_pkey on deliveries/);
  });

  // The lease fence (owner and lease_until) is compared on the projection rows the read already fetched by key: a
  // completion under another lease sends the same statements, and their plans are the ones checked above.
  it("completion's lease fence adds no statement and changes no text", async () => {
    const texts = async (leaseUntil: number) =>
      (await sentBy((tx) => complete(tx, [completionOf(1, leaseUntil)], 0, undefined), rowsFor)).sent.map(
        (s) => s.text,
      );
    expect(await texts(120_000)).toEqual(await texts(60_000));
  });

  it('the writes keyed by delivery id probe deliveries by key on a young table without statistics', async () => {
    // A few times the batch, never analysed: where per-call plans (without PROBES_ONLY) took a scan for cheaper.
    await client.query(
      `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, webhook_id, status,
                               next_attempt_at, created_at, updated_at)
       SELECT 'dlv_' || i, 'ten_1', 'ep_1', 'evt_' || i, i, 't', 'msg_' || i, 'pending', 0, 0, 0
         FROM generate_series(1, 2000) i`,
    );
    try {
      for (const run of [leaseRun, completeRun]) {
        const { sent } = await sentBy(run, rowsFor);
        const write = sent.find((s) => /WITH (leased|written) AS/.test(s.text))!;
        const plan = await genericPlan(write.text);
        expectProbesOnly(plan);
        expect(plan).toMatch(/Index Scan (using|on) deliveries_pkey\b/);
        // Planned per call with the ids as constants, as before PROBES_ONLY: a scan of the whole table.
        await client.query('BEGIN');
        try {
          await client.query('SET LOCAL plan_cache_mode = force_custom_plan');
          const custom = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${write.text}`, write.values);
          expect(custom.rows.map((x) => x['QUERY PLAN']).join('\n')).toMatch(/Seq Scan on deliveries\b/);
        } finally {
          await client.query('ROLLBACK');
        }
      }
    } finally {
      await client.query('DELETE FROM deliveries');
    }
  });

  // The queue rebuild (queue-rebuild.ts) holds an endpoint's queue row while it reads, so its read must stay small
  // whatever the tables hold: never a walk of all the endpoint's deliveries or a scan of the table.
  it("queue rebuild's read takes the leases through deliveries_leased and the due time through deliveries_ready", async () => {
    const plan = await genericPlan(REBUILT);
    expect(plan).toMatch(/Index Scan on deliveries_leased|Index Scan using deliveries_leased/);
    expect(plan).toMatch(/Scan using deliveries_ready on deliveries/);
    expect(plan).not.toMatch(/deliveries_endpoint|Seq Scan/);
  });

  // The delivery reconstruction (delivery-reconstruct.ts) must not read the attempt log whole for each batch: the
  // batch's attempts are one range of attempts_event, each checked against its delivery by a key probe.
  it("delivery reconstruction reads a batch's attempts as one range of attempts_event", async () => {
    const plan = await genericPlan(LOST);
    expect(plan).toMatch(/Index Scan using attempts_event on attempts/);
    expectProbesOnly(plan);
  });
});

function completionOf(n = 1, leaseUntil = 60_000): Parameters<typeof complete>[1][number] {
  return {
    leaseOwner: 'w1',
    leaseUntil,
    next: { status: 'delivered' },
    attempt: {
      id: `att_${n}`,
      deliveryId: `dlv_${n}`,
      endpointId: 'ep_1',
      tenantId: 'ten_1',
      eventId: `evt_${n}`,
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
