import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { type Principal, requireOperator } from '../../app/auth.ts';
import { createTenant, deleteTenant, replaceTenantKey } from '../../app/manage-tenants.ts';
import { requireStepUp, STEP_UP_HEADER } from '../../app/step-up.ts';
import { ApiError } from '../../domain/errors.ts';
import type { ApiDeps } from '../build-api.ts';
import { bodyOptional, EmptyBody, StepUpHeaders } from '../control-schemas.ts';
import {
  errorResponses,
  IdParams,
  iso,
  listOf,
  listQuery,
  Tenant,
  TenantCreate,
  TenantCreated,
  Timestamp,
} from '../schemas.ts';

const TenantKeyReplaced = Type.Object({
  tenant_id: Type.String(),
  tenant_key: Type.String({ description: 'The new tenant key (hkt_…). Shown once.' }),
  key_id: Type.String({ description: "The new key's id, as in the audit record `tenant.key_replaced`." }),
  created_at: Timestamp,
});

/**
 * Who may replace a tenant's key: the operator (its token is its only credential, as for deleting a tenant), or
 * the tenant itself with a fresh step-up token — with a stolen key alone an attacker could otherwise lock the owner
 * out. A tenant key naming another tenant is answered as if there were no such tenant, before step-up is looked
 * at, so it learns nothing about other ids.
 */
function mayReplaceKey(deps: ApiDeps, p: Principal, tenantId: string, stepUp: string | string[] | undefined) {
  if (p.kind === 'operator') return;
  if (p.kind !== 'tenant') throw new ApiError('forbidden');
  if (p.tenantId !== tenantId) throw new ApiError('tenant_not_found');
  requireStepUp(deps, tenantId, stepUp);
}

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

  app.post<{ Params: { id: string } }>(
    '/v1/tenants/:id/key',
    {
      preValidation: bodyOptional,
      schema: {
        summary: "Replace a tenant's key: a new one, shown once; every key it had stops working",
        description:
          "The operator may replace any tenant's key; a tenant key only its own tenant's, with a fresh " +
          "`X-Step-Up-Token` (403 `step_up_required` with `details.step_up_url` without one). Another tenant's " +
          'id answers 404 `tenant_not_found`, as does a deleted tenant. The old key is refused at once by the ' +
          'process that answered and within the authentication cache time (`HOOKRAIL_AUTH_CACHE_MS`, default ' +
          "5 s) by every other. Recorded in the audit trail as `tenant.key_replaced` with the new key's id and " +
          'prefix. The body is optional (send none, or `{}`).',
        tags: ['tenants'],
        params: IdParams,
        headers: StepUpHeaders,
        body: EmptyBody,
        response: { 201: TenantKeyReplaced, ...errorResponses(400, 401, 403, 404, 415, 503) },
      },
    },
    async (req, reply) => {
      const tenantId = req.params.id;
      mayReplaceKey(deps, req.principal, tenantId, req.headers['x-step-up-token']);
      const replaced = await replaceTenantKey(deps, req.principal, tenantId);
      deps.auth.forgetTenant(tenantId);
      return reply.status(201).send({
        tenant_id: tenantId,
        tenant_key: replaced.key,
        key_id: replaced.record.id,
        created_at: iso(replaced.record.createdAt),
      });
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/v1/tenants/:id',
    {
      schema: {
        summary: 'Delete a tenant (operator, with step-up): its keys stop working and delivery stops at once',
        description:
          "An elevated action: without a fresh operator step-up token (`POST /v1/auth/step-up` with the operator's " +
          'TOTP code) in `X-Step-Up-Token` it answers 403 `step_up_required` and changes nothing.',
        tags: ['tenants'],
        params: IdParams,
        headers: StepUpHeaders,
        response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) },
      },
    },
    async (req, reply) => {
      requireOperator(req.principal);
      requireStepUp(deps, null, req.headers[STEP_UP_HEADER]);
      await deleteTenant(deps, req.principal, req.params.id);
      deps.tenants.forget(req.params.id);
      deps.auth.forgetAll();
      return reply.status(204).send();
    },
  );
};
