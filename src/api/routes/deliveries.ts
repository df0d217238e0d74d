import { isUtf8 } from 'node:buffer';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { readScope } from '../../app/auth.ts';
import { getEndpoint } from '../../app/manage-endpoints.ts';
import { deliveryBody } from '../../domain/delivery-request.ts';
import { ApiError } from '../../domain/errors.ts';
import type { AttemptRecord, DeliveryRecord, DeliveryStatus } from '../../ports/delivery-store.ts';
import type { ApiDeps } from '../build-api.ts';
import { AttemptDetail, AttemptSummary, Delivery, DeliveryListQuery, isoOrNull } from '../control-schemas.ts';
import { errorResponses, IdParams, iso, listOf } from '../schemas.ts';

export const deliveryJson = (d: DeliveryRecord) => ({
  id: d.id,
  tenant_id: d.tenantId,
  endpoint_id: d.endpointId,
  event_id: d.eventId,
  event_type: d.eventType,
  resource_id: d.resourceId,
  webhook_id: d.webhookId,
  status: d.status,
  status_reason: d.statusReason,
  attempts: d.attempts,
  next_attempt_at: isoOrNull(d.nextAttemptAt),
  first_attempt_at: isoOrNull(d.firstAttemptAt),
  last_attempt_at: isoOrNull(d.lastAttemptAt),
  replayed_from: d.replayedFrom,
  created_at: iso(d.createdAt),
  updated_at: iso(d.updatedAt),
});

const timingsJson = (a: AttemptRecord) => ({
  due_at: iso(a.dueAt),
  started_at: iso(a.startedAt),
  finished_at: iso(a.finishedAt),
  queue_ms: a.queueMs,
  platform_ms: a.platformMs,
  consumer_ms: a.consumerMs,
});

const attemptSummaryJson = (a: AttemptRecord) => ({
  id: a.id,
  delivery_id: a.deliveryId,
  attempt_no: a.attemptNo,
  url: a.url,
  outcome: a.outcome,
  status_code: a.statusCode,
  error_class: a.errorClass,
  error_message: a.errorMessage,
  timings: timingsJson(a),
});

/**
 * The stored 4 KiB prefix as text when it is UTF-8. The cut at 4 KiB may split a character; up to three trailing
 * bytes are dropped for the text view (the base64 view keeps every byte).
 */
function prefixText(bytes: Buffer): string | null {
  for (let drop = 0; drop <= Math.min(3, bytes.length); drop++) {
    const candidate = bytes.subarray(0, bytes.length - drop);
    if (isUtf8(candidate)) return candidate.toString('utf8');
  }
  return null;
}

export const deliveryRoutes = (deps: ApiDeps) => async (app: FastifyInstance) => {
  app.get<{
    Params: { id: string };
    Querystring: { limit: number; cursor?: string; status?: DeliveryStatus };
  }>(
    '/v1/endpoints/:id/deliveries',
    {
      schema: {
        summary: "An endpoint's deliveries, newest first, optionally by status",
        tags: ['deliveries'],
        params: IdParams,
        querystring: DeliveryListQuery,
        response: { 200: listOf(Delivery), ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req) => {
      const endpoint = await getEndpoint(deps, readScope(req.principal), req.params.id);
      const page = await deps.store.deliveryList({
        endpointId: endpoint.id,
        tenantId: endpoint.tenantId,
        status: req.query.status ?? null,
        limit: req.query.limit,
        cursor: req.query.cursor ?? null,
      });
      return { data: page.data.map(deliveryJson), next_cursor: page.nextCursor };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/deliveries/:id',
    {
      schema: {
        summary: 'Read one delivery',
        tags: ['deliveries'],
        params: IdParams,
        response: { 200: Delivery, ...errorResponses(401, 403, 404) },
      },
    },
    async (req) => {
      const delivery = await deps.store.deliveryGet({
        id: req.params.id,
        tenantId: readScope(req.principal),
      });
      if (!delivery) throw new ApiError('not_found', 'No such delivery.');
      return deliveryJson(delivery);
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/deliveries/:id/attempts',
    {
      schema: {
        summary: "A delivery's attempts, first to last",
        description:
          'All of them in one list (a delivery makes at most 12 attempts), so `next_cursor` is always null and ' +
          'the list takes no query parameters.',
        tags: ['deliveries'],
        params: IdParams,
        querystring: Type.Object({}, { additionalProperties: false }),
        response: { 200: listOf(AttemptSummary), ...errorResponses(401, 403, 404) },
      },
    },
    async (req) => {
      const scope = readScope(req.principal);
      const delivery = await deps.store.deliveryGet({ id: req.params.id, tenantId: scope });
      if (!delivery) throw new ApiError('not_found', 'No such delivery.');
      const attempts = await deps.store.attemptList({ deliveryId: delivery.id, tenantId: delivery.tenantId });
      return { data: attempts.map(attemptSummaryJson), next_cursor: null };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/attempts/:id',
    {
      schema: {
        summary: 'Request inspector: exactly what was sent and what came back',
        description:
          'Every hop with the exact headers sent (signatures included), the body bytes (rebuilt from the ' +
          'immutable event: identical on every attempt), the response status, headers and first 4 KiB of the ' +
          'body, the error class and the time split between queue, Hookrail and the consumer.',
        tags: ['deliveries'],
        params: IdParams,
        response: { 200: AttemptDetail, ...errorResponses(401, 403, 404) },
      },
    },
    async (req) => {
      const attempt = await deps.store.attemptGet({ id: req.params.id, tenantId: readScope(req.principal) });
      if (!attempt) throw new ApiError('not_found', 'No such attempt.');
      const delivery = await deps.store.deliveryGet({ id: attempt.deliveryId, tenantId: attempt.tenantId });
      const event = delivery
        ? await deps.store.eventGet({ id: delivery.eventId, tenantId: attempt.tenantId })
        : null;
      const body = event ? deliveryBody(event) : null;
      const responseBody = attempt.responseBody !== null ? Buffer.from(attempt.responseBody, 'base64') : null;
      const answered = attempt.statusCode !== null || attempt.responseHeaders !== null;
      return {
        id: attempt.id,
        tenant_id: attempt.tenantId,
        endpoint_id: attempt.endpointId,
        delivery_id: attempt.deliveryId,
        attempt_no: attempt.attemptNo,
        outcome: attempt.outcome,
        error_class: attempt.errorClass,
        error_message: attempt.errorMessage,
        request: {
          method: 'POST' as const,
          url: attempt.url,
          hops: attempt.request.hops.map((h) => ({ url: h.url, headers: h.headers, status: h.status })),
          body: body ? body.toString('utf8') : null,
          body_size: body ? body.length : null,
        },
        response: answered
          ? {
              status: attempt.statusCode,
              headers: attempt.responseHeaders ?? {},
              body_base64: responseBody ? responseBody.toString('base64') : '',
              body_text: responseBody ? prefixText(responseBody) : '',
            }
          : null,
        timings: timingsJson(attempt),
      };
    },
  );
};
