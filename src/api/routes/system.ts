import type { FastifyInstance } from 'fastify';
import type { ApiDeps } from '../build-api.ts';

const PING_TIMEOUT_MS = 2000;

export const systemRoutes = (deps: ApiDeps) => async (app: FastifyInstance) => {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  // Ready when the store answers; load balancers stop sending traffic while it does not.
  app.get('/readyz', { schema: { hide: true } }, async (req, reply) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        deps.store.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('ping timed out')), PING_TIMEOUT_MS);
        }),
      ]);
      return { ready: true, store: deps.store.capabilities.kind };
    } catch (err) {
      // The store's own message (an address, a user name) goes to the log, not to whoever asks.
      req.log.warn({ err }, 'readiness check failed');
      reply.header('retry-after', '2');
      return reply
        .status(503)
        .send({ ready: false, store: deps.store.capabilities.kind, reason: 'store_unavailable' });
    } finally {
      clearTimeout(timer);
    }
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  // Prometheus scrape endpoint (no auth, like /healthz: bind the listener to a private interface or filter it).
  const metrics = deps.metrics;
  if (metrics) {
    app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
      const { contentType, body } = await metrics.render();
      return reply
        .type(contentType)
        .serializer((s: string) => s)
        .send(body);
    });
  }
};
