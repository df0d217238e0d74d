import type { FastifyInstance } from 'fastify';
import { publishedRetrySchedule } from '../../domain/retry-schedule.ts';
import { RetrySchedule } from '../control-schemas.ts';

/** Machine-readable published interfaces: no credentials needed (`config.public` skips authentication). */
export const publicRoutes = () => async (app: FastifyInstance) => {
  const schedule = publishedRetrySchedule();

  app.get(
    '/v1/retry-schedule',
    {
      config: { public: true },
      schema: {
        summary: 'The retry schedule every delivery follows (public)',
        description:
          'Attempt limits, the full-jitter backoff per attempt, Retry-After handling and which answers are ' +
          'delivered, retried or permanent. Versioned; a change is an interface change.',
        tags: ['public'],
        security: [],
        response: { 200: RetrySchedule },
      },
    },
    async () => schedule,
  );
};
