/**
 * The ceiling for bench/intake.ts: a bare Fastify server that parses the same JSON body and answers what intake
 * answers (202 `{id, type, created_at}`, serialised from a response schema as Hookrail's routes are), without
 * authenticating, validating or storing anything. Whatever Hookrail does beyond this is what the ratio measures.
 *
 *   node --import tsx bench/ceiling-server.ts   → prints "listening on http://127.0.0.1:<port>"; SIGTERM stops it.
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';

const app = Fastify({ logger: false, bodyLimit: 256 * 1024 });

app.post<{ Body: { type?: unknown } }>(
  '/v1/events',
  {
    schema: {
      response: {
        202: {
          type: 'object',
          properties: { id: { type: 'string' }, type: { type: 'string' }, created_at: { type: 'string' } },
        },
      },
    },
  },
  async (req, reply) =>
    reply
      .status(202)
      .send({ id: randomUUID(), type: String(req.body.type), created_at: new Date().toISOString() }),
);

const url = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
process.stdout.write(`listening on ${url}\n`);
process.once('SIGTERM', () => {
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
