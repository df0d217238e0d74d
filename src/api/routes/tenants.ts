import type { FastifyInstance } from 'fastify';
import { requireOperator } from '../../app/auth.ts';
import { createTenant } from '../../app/manage-tenants.ts';
import { ApiError } from '../../domain/errors.ts';
import type { ApiDeps } from '../build-api.ts';
import {
  errorResponses,
  IdParams,
  iso,
  listOf,
  listQuery,
  Tenant,
  TenantCreate,
  TenantCreated,
} from '../schemas.ts';

export const tenantRoutes = (deps: ApiDeps) => async (app: FastifyInstance) => {
  app.post<{ Body: { name: string } }>(
    '/v1/tenants',
    {
      schema: {
        summary: 'Create a tenant (operator)',
        description:
          'The tenant key and the step-up TOTP seed are in this answer only; they are never shown again.',
        tags: ['tenants'],
        body: TenantCreate,
        response: { 201: TenantCreated, ...errorResponses(400, 401, 403, 415, 503) },
      },
    },
    async (req, reply) => {
      requireOperator(req.principal);
      const created = await createTenant(deps, { name: req.body.name });
      return reply.status(201).send({
        id: created.tenant.id,
        name: created.tenant.name,
        created_at: iso(created.tenant.createdAt),
        tenant_key: created.tenantKey,
        step_up: { totp_seed: created.totpSeed, otpauth_uri: created.otpauthUri },
      });
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string } }>(
    '/v1/tenants',
    {
      schema: {
        summary: 'List tenants (operator)',
        tags: ['tenants'],
        querystring: listQuery('tenant'),
        response: { 200: listOf(Tenant), ...errorResponses(400, 401, 403) },
      },
    },
    async (req) => {
      requireOperator(req.principal);
      const page = await deps.store.tenantList({ limit: req.query.limit, cursor: req.query.cursor ?? null });
      return {
        data: page.data.map((t) => ({ id: t.id, name: t.name, created_at: iso(t.createdAt) })),
        next_cursor: page.nextCursor,
      };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/v1/tenants/:id',
    {
      schema: {
        summary: 'Delete a tenant (operator): its keys stop working and delivery stops at once',
        tags: ['tenants'],
        params: IdParams,
        response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) },
      },
    },
    async (req, reply) => {
      requireOperator(req.principal);
      const deleted = await deps.store.tenantDelete({ id: req.params.id, now: deps.clock.now() });
      if (!deleted) throw new ApiError('not_found');
      deps.tenants.forget(req.params.id);
      deps.auth.forgetAll();
      return reply.status(204).send();
    },
  );
};
