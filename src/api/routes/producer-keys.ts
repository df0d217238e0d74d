import type { FastifyInstance } from 'fastify';
import { requireOperator } from '../../app/auth.ts';
import { createProducerKey } from '../../app/manage-tenants.ts';
import { ApiError } from '../../domain/errors.ts';
import type { ApiDeps } from '../build-api.ts';
import {
  errorResponses,
  IdParams,
  iso,
  listOf,
  listQuery,
  ProducerKey,
  ProducerKeyCreate,
  ProducerKeyCreated,
} from '../schemas.ts';

export const producerKeyRoutes = (deps: ApiDeps) => async (app: FastifyInstance) => {
  app.post<{ Body: { name?: string } }>(
    '/v1/producer-keys',
    {
      schema: {
        summary: "Create a producer key for the product's backend (operator); shown once",
        tags: ['producer-keys'],
        body: ProducerKeyCreate,
        response: { 201: ProducerKeyCreated, ...errorResponses(400, 401, 403, 415, 503) },
      },
    },
    async (req, reply) => {
      requireOperator(req.principal);
      const { record, key } = await createProducerKey(deps, { name: req.body.name ?? null });
      return reply.status(201).send({
        id: record.id,
        name: record.name,
        prefix: record.prefix,
        created_at: iso(record.createdAt),
        key,
      });
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string } }>(
    '/v1/producer-keys',
    {
      schema: {
        summary: 'List live producer keys (operator); the keys themselves are never shown again',
        tags: ['producer-keys'],
        querystring: listQuery('apiKey'),
        response: { 200: listOf(ProducerKey), ...errorResponses(400, 401, 403) },
      },
    },
    async (req) => {
      requireOperator(req.principal);
      const page = await deps.store.apiKeyList({
        kind: 'producer',
        limit: req.query.limit,
        cursor: req.query.cursor ?? null,
      });
      return {
        data: page.data.map((k) => ({
          id: k.id,
          name: k.name,
          prefix: k.prefix,
          created_at: iso(k.createdAt),
        })),
        next_cursor: page.nextCursor,
      };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/v1/producer-keys/:id',
    {
      schema: {
        summary: 'Revoke a producer key (operator)',
        tags: ['producer-keys'],
        params: IdParams,
        response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) },
      },
    },
    async (req, reply) => {
      requireOperator(req.principal);
      const revoked = await deps.store.apiKeyRevoke({
        id: req.params.id,
        kind: 'producer',
        now: deps.clock.now(),
      });
      if (!revoked) throw new ApiError('not_found');
      deps.auth.forgetAll();
      return reply.status(204).send();
    },
  );
};
