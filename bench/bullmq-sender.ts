/**
 * A webhook sender built the common way on BullMQ and Redis, for bench/bullmq.ts: the comparison point for
 * bench:delivery. It does what a team writing its own sender usually writes, and no more:
 *
 *   - intake: Fastify, `POST /v1/events` (bearer key, JSON schema like Hookrail's), one BullMQ job per matching
 *     endpoint (`queue.add`, answered 202 once Redis acknowledged the job), `jobId` = the `webhook-id`;
 *   - delivery: a BullMQ Worker with `--concurrency` jobs at once, each a Standard Webhooks-signed POST through one
 *     undici Agent (connect 5 s, 15 s for headers and body); a non-2xx answer or an error throws, and BullMQ retries
 *     (12 attempts, exponential backoff); completed jobs are removed.
 *
 * What it does not do, and Hookrail does: an attempt log, per-endpoint in-flight caps and fair leasing, circuit
 * breakers, address checks, secrets encrypted at rest, consistent unsubscribe. Those cost Hookrail CPU that this
 * sender does not spend. Subscriptions are fixed at start (the spec), not read per event from a store.
 *
 *   node --import tsx bench/bullmq-sender.ts '<SenderSpec JSON>'
 *     → prints "listening on http://127.0.0.1:<port>"; GET /stats → the queue's job counts; SIGTERM stops it.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { Agent } from 'undici';

export interface SenderSpec {
  redisPort: number;
  producerKey: string;
  /** `whsec_…`: one secret for every endpoint. */
  secret: string;
  concurrency: number;
  /** Event type → endpoint URL (each bench endpoint subscribes to one type). */
  endpoints: Array<{ type: string; url: string }>;
  /** `all`: intake and worker in this process; otherwise one of them (BullMQ's usual deployment runs both apart). */
  role: 'all' | 'intake' | 'worker';
}

interface DeliveryJob {
  eventId: string;
  type: string;
  createdAt: number;
  /** The event's data as JSON text. */
  data: string;
  url: string;
}

const QUEUE = 'webhooks';

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as SenderSpec;
  // BullMQ 6 takes a client instance (ioredis is its optional peer); the Worker duplicates it for blocking reads.
  const connection = new Redis({ host: '127.0.0.1', port: spec.redisPort, maxRetriesPerRequest: null });
  const key = Buffer.from(spec.secret.slice('whsec_'.length), 'base64');
  const queue = new Queue<DeliveryJob>(QUEUE, {
    connection,
    defaultJobOptions: {
      attempts: 12,
      backoff: { type: 'exponential', delay: 5_000 },
      removeOnComplete: true,
      removeOnFail: false,
    },
  });

  const worker = spec.role === 'intake' ? null : startWorker(spec, connection, key);
  const app = Fastify({ logger: false, bodyLimit: 256 * 1024 });
  if (spec.role !== 'worker') {
    const urlOf = new Map(spec.endpoints.map((e) => [e.type, e.url]));
    const auth = `Bearer ${spec.producerKey}`;
    app.post<{ Body: { tenant_id: string; type: string; data: Record<string, unknown> } }>(
      '/v1/events',
      { schema: { body: EVENT_SCHEMA } },
      async (req, reply) => {
        if (req.headers.authorization !== auth) return reply.code(401).send({ error: 'unauthorized' });
        const createdAt = Date.now();
        const eventId = `evt_${randomBytes(13).toString('hex')}`;
        const url = urlOf.get(req.body.type);
        if (url !== undefined) {
          await queue.add(
            'deliver',
            { eventId, type: req.body.type, createdAt, data: JSON.stringify(req.body.data), url },
            { jobId: `msg_${randomBytes(13).toString('hex')}` },
          );
        }
        return reply.code(202).send({ id: eventId });
      },
    );
  }
  app.get('/stats', async () => queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed'));

  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  process.stdout.write(`listening on ${address}\n`);
  process.once('SIGTERM', () => {
    void (async () => {
      await app.close();
      await worker?.close();
      await queue.close();
      connection.disconnect();
      process.exit(0);
    })();
  });
}

const EVENT_SCHEMA = {
  type: 'object',
  required: ['tenant_id', 'type', 'data'],
  additionalProperties: false,
  properties: {
    tenant_id: { type: 'string', maxLength: 64 },
    type: { type: 'string', minLength: 1, maxLength: 128 },
    data: { type: 'object' },
  },
} as const;

/** The delivery side: a BullMQ Worker sending each job as a signed POST; a throw makes BullMQ retry it. */
function startWorker(spec: SenderSpec, connection: Redis, key: Buffer): { close(): Promise<void> } {
  const agent = new Agent({
    connect: { timeout: 5_000 },
    headersTimeout: 15_000,
    bodyTimeout: 15_000,
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 10_000,
  });
  const worker = new Worker<DeliveryJob>(
    QUEUE,
    async (job) => {
      const { eventId, type, createdAt, data, url } = job.data;
      const body =
        `{"id":${JSON.stringify(eventId)},"type":${JSON.stringify(type)},` +
        `"timestamp":"${new Date(createdAt).toISOString()}","data":${data}}`;
      const webhookId = job.id as string;
      const timestamp = Math.floor(Date.now() / 1000);
      const signature = createHmac('sha256', key)
        .update(`${webhookId}.${timestamp}.${body}`)
        .digest('base64');
      const u = new URL(url);
      const res = await agent.request({
        origin: u.origin,
        path: u.pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'bullmq-sender',
          'webhook-id': webhookId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': `v1,${signature}`,
        },
        body,
      });
      await res.body.dump({ limit: 64 * 1024 });
      if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`HTTP ${res.statusCode}`);
    },
    { connection, concurrency: spec.concurrency },
  );
  worker.on('error', (err) => process.stderr.write(`worker: ${err.message}\n`));
  return {
    async close() {
      await worker.close();
      await agent.close();
    },
  };
}

main().catch((err) => {
  process.stderr.write(`bullmq-sender: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
