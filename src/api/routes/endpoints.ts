import type { FastifyInstance } from 'fastify';
import { readScope } from '../../app/auth.ts';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  ORDERING_NOTES,
  requireTenant,
  setEndpointStatus,
  updateEndpoint,
} from '../../app/manage-endpoints.ts';
import type { EndpointRecord, Ordering, SecretRecord } from '../../ports/delivery-store.ts';
import type { ApiDeps } from '../build-api.ts';
import {
  bodyOptional,
  EmptyBody,
  Endpoint,
  EndpointCreate,
  EndpointCreated,
  EndpointListQuery,
  EndpointPatch,
  isoOrNull,
  StepUpHeaders,
} from '../control-schemas.ts';
import { errorResponses, IdParams, iso, listOf } from '../schemas.ts';

interface EndpointBody {
  url: string;
  description?: string;
  event_types: string[];
  ordering?: Ordering;
  max_concurrency?: number;
  headers?: Record<string, string>;
}

type EndpointPatchBody = Partial<Omit<EndpointBody, 'description'>> & { description?: string | null };

export const endpointJson = (e: EndpointRecord) => ({
  id: e.id,
  tenant_id: e.tenantId,
  url: e.url,
  description: e.description,
  event_types: e.eventTypes,
  ordering: e.ordering,
  ordering_note: ORDERING_NOTES[e.ordering],
  max_concurrency: e.maxConcurrency,
  headers: e.headers,
  status: e.status,
  disabled_reason: e.disabledReason,
  created_at: iso(e.createdAt),
  updated_at: iso(e.updatedAt),
});

export const secretJson = (s: SecretRecord) => ({
  id: s.id,
  created_at: iso(s.createdAt),
  active_from: iso(s.activeFrom),
  active_until: isoOrNull(s.activeUntil),
});

export const endpointRoutes = (deps: ApiDeps) => async (app: FastifyInstance) => {
  app.post<{ Body: EndpointBody }>(
    '/v1/endpoints',
    {
      schema: {
        summary: 'Register an endpoint (tenant); its first signing secret is in this answer only',
        tags: ['endpoints'],
        body: EndpointCreate,
        response: { 201: EndpointCreated, ...errorResponses(400, 401, 403, 415, 422, 503) },
      },
    },
    async (req, reply) => {
      const by = { tenantId: requireTenant(req.principal), principal: req.principal };
      const created = await createEndpoint(deps, by, {
        url: req.body.url,
        description: req.body.description,
        eventTypes: req.body.event_types,
        ordering: req.body.ordering,
        maxConcurrency: req.body.max_concurrency,
        headers: req.body.headers,
      });
      return reply.status(201).send({
        ...endpointJson(created.endpoint),
        secret: { ...secretJson(created.secret), secret: created.secretValue },
      });
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string; tenant_id?: string } }>(
    '/v1/endpoints',
    {
      schema: {
        summary: 'List endpoints, newest first',
        description:
          'Tenant keys see their own endpoints; the operator sees all and may filter by `tenant_id`.',
        tags: ['endpoints'],
        querystring: EndpointListQuery,
        response: { 200: listOf(Endpoint), ...errorResponses(400, 401, 403) },
      },
    },
    async (req) => {
      const scope = readScope(req.principal);
      if (scope !== null && req.query.tenant_id !== undefined && req.query.tenant_id !== scope) {
        return { data: [], next_cursor: null };
      }
      const page = await deps.store.endpointList({
        tenantId: scope ?? req.query.tenant_id ?? null,
        limit: req.query.limit,
        cursor: req.query.cursor ?? null,
      });
      return { data: page.data.map(endpointJson), next_cursor: page.nextCursor };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/endpoints/:id',
    {
      schema: {
        summary: 'Read one endpoint',
        tags: ['endpoints'],
        params: IdParams,
        response: { 200: Endpoint, ...errorResponses(401, 403, 404) },
      },
    },
    async (req) => endpointJson(await getEndpoint(deps, readScope(req.principal), req.params.id)),
  );

  app.patch<{ Params: { id: string }; Body: EndpointPatchBody }>(
    '/v1/endpoints/:id',
    {
      schema: {
        summary: 'Change an endpoint (tenant); changing `url` needs a step-up token',
        description:
          'Only the fields sent change; `headers` and `event_types` are replaced as a whole. Narrowing ' +
          '`event_types` cancels pending deliveries that no longer match. Changing `url` without a fresh ' +
          '`X-Step-Up-Token` answers 403 `step_up_required` with `details.step_up_url`.',
        tags: ['endpoints'],
        params: IdParams,
        headers: StepUpHeaders,
        body: EndpointPatch,
        response: { 200: Endpoint, ...errorResponses(400, 401, 403, 404, 415, 422, 503) },
      },
    },
    async (req) => {
      const b = req.body;
      const updated = await updateEndpoint(deps, {
        by: { tenantId: requireTenant(req.principal), principal: req.principal },
        id: req.params.id,
        stepUpToken: req.headers['x-step-up-token'],
        patch: {
          url: b.url,
          description: b.description,
          eventTypes: b.event_types,
          ordering: b.ordering,
          maxConcurrency: b.max_concurrency,
          headers: b.headers,
        },
      });
      return endpointJson(updated);
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/v1/endpoints/:id',
    {
      schema: {
        summary: 'Delete an endpoint (tenant): pending deliveries are cancelled, no new attempt starts',
        tags: ['endpoints'],
        params: IdParams,
        response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404) },
      },
    },
    async (req, reply) => {
      const by = { tenantId: requireTenant(req.principal), principal: req.principal };
      await deleteEndpoint(deps, by, req.params.id);
      return reply.status(204).send();
    },
  );

  app.post<{ Params: { id: string } }>(
    '/v1/endpoints/:id/disable',
    {
      preValidation: bodyOptional,
      schema: {
        summary: 'Disable an endpoint (tenant): nothing is sent, deliveries keep accumulating as backlog',
        description: 'The body is optional (send none, or `{}`).',
        tags: ['endpoints'],
        params: IdParams,
        body: EmptyBody,
        response: { 200: Endpoint, ...errorResponses(400, 401, 403, 404, 415) },
      },
    },
    async (req) => {
      const by = { tenantId: requireTenant(req.principal), principal: req.principal };
      const endpoint = await setEndpointStatus(deps, { by, id: req.params.id, status: 'disabled' });
      return endpointJson(endpoint);
    },
  );
};
