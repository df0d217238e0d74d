import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { acceptEvent } from '../../app/accept-event.ts';
import { readScope } from '../../app/auth.ts';
import { ApiError } from '../../domain/errors.ts';
import { rawJsonMember } from '../../domain/raw-json-member.ts';
import { parseTraceparent } from '../../domain/trace-context.ts';
import type { EventRecord } from '../../ports/store.ts';
import type { ApiDeps } from '../build-api.ts';
import {
  DOCUMENTED_HEADERS,
  Event,
  EventAccepted,
  EventCreate,
  EventListQuery,
  errorResponses,
  IdParams,
  iso,
  listOf,
} from '../schemas.ts';

type EventCreateBody = {
  tenant_id: string;
  type: string;
  data: Record<string, unknown>;
  resource_id?: string;
};

// `data` is stored as the JSON text the producer sent and embedded as is: a response schema's serializer would
// re-encode a parsed value (digits beyond 2^53, `1.10`, `-0`, escapes, duplicate keys), and it costs a parse.
const eventJson = (e: EventRecord) =>
  `{"id":${JSON.stringify(e.id)},"tenant_id":${JSON.stringify(e.tenantId)},"type":${JSON.stringify(e.type)},` +
  `"resource_id":${JSON.stringify(e.resourceId)},"data":${e.data},"created_at":"${iso(e.createdAt)}"}`;

export const eventRoutes = (deps: ApiDeps) => async (app: FastifyInstance) => {
  if (deps.serves.intake && deps.committer) {
    const acceptDeps = { ...deps, committer: deps.committer };
    app.post<{ Body: EventCreateBody }>(
      '/v1/events',
      {
        schema: {
          summary: 'Hand over an event (producer key or operator token)',
          description:
            'Answers 202 only after the event is durable. An `Idempotency-Key` header makes retries safe: the same ' +
            'key for the same tenant within 24 h answers with the original event, the same 202, marked ' +
            '`idempotent-replayed: true` (as Stripe replays an idempotent answer: a producer that checks for 202 ' +
            'treats a safe retry as the success it is). A retry repeats the request: the same key with another ' +
            '`type`, `resource_id` or `data` answers 409 `idempotency_key_reused`; `data` is compared as the exact ' +
            'text sent, which is what is stored and delivered (`1.10` and `1.1` differ). A W3C `traceparent` ' +
            'header is kept with the event: with tracing on, each delivery attempt is a span in that trace. An ' +
            'invalid one is ignored.',
          tags: ['events'],
          // Documented here; checked by the use case (a bad key answers validation_failed naming the header, a bad
          // traceparent is ignored), so no validator runs for them (DOCUMENTED_HEADERS).
          headers: Type.Object(
            {
              'idempotency-key': Type.Optional(
                Type.String({
                  description:
                    '1-255 printable ASCII characters, unique per tenant for 24 h. A retry with the same key and the ' +
                    'same request answers the original 202 with `idempotent-replayed: true`.',
                }),
              ),
              traceparent: Type.Optional(
                Type.String({
                  description: 'W3C Trace Context: the delivery attempts become spans of this trace.',
                }),
              ),
            },
            { [DOCUMENTED_HEADERS]: true },
          ),
          body: EventCreate,
          response: {
            202: EventAccepted,
            ...errorResponses(400, 401, 403, 404, 409, 413, 415, 503),
          },
        },
      },
      async (req, reply) => {
        if (req.principal.kind !== 'producer' && req.principal.kind !== 'operator')
          throw new ApiError('forbidden');
        const header = req.headers['idempotency-key'];
        if (Array.isArray(header))
          throw new ApiError('validation_failed', 'Send one Idempotency-Key header.');
        // The body parsed as JSON (the only parser) and its schema requires `data`, so the member is there.
        const dataText = req.bodyText === null ? null : rawJsonMember(req.bodyText, 'data');
        if (dataText === null) throw new Error('a validated event body without its data text');
        const { event, replayed } = await acceptEvent(acceptDeps, {
          tenantId: req.body.tenant_id,
          type: req.body.type,
          dataText,
          resourceId: req.body.resource_id ?? null,
          idempotencyKey: header ?? null,
          // An invalid or repeated traceparent is ignored, as W3C Trace Context asks: never a reason to refuse.
          traceParent: parseTraceparent(
            typeof req.headers.traceparent === 'string' ? req.headers.traceparent : null,
          ),
        });
        if (replayed) reply.header('idempotent-replayed', 'true');
        else deps.metrics?.eventAccepted();
        return reply.status(202).send({ id: event.id, type: event.type, created_at: iso(event.createdAt) });
      },
    );
  }

  if (!deps.serves.control) return;

  app.get<{ Params: { id: string } }>(
    '/v1/events/:id',
    {
      schema: {
        summary: 'Read one accepted event, as recorded (immutable)',
        tags: ['events'],
        params: IdParams,
        response: { 200: Event, ...errorResponses(401, 403, 404) },
      },
    },
    async (req, reply) => {
      const event = await deps.store.eventGet({ id: req.params.id, tenantId: readScope(req.principal) });
      if (!event) throw new ApiError('not_found');
      return reply
        .type('application/json')
        .serializer((s: string) => s)
        .send(eventJson(event));
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string; tenant_id?: string; type?: string } }>(
    '/v1/events',
    {
      schema: {
        summary: 'List accepted events, newest first',
        description: 'Tenant keys see their own events; the operator may filter by `tenant_id`.',
        tags: ['events'],
        querystring: EventListQuery,
        response: { 200: listOf(Event), ...errorResponses(400, 401, 403) },
      },
    },
    async (req, reply) => {
      const scope = readScope(req.principal);
      const tenantId = scope ?? req.query.tenant_id ?? null;
      if (scope !== null && req.query.tenant_id !== undefined && req.query.tenant_id !== scope) {
        return reply
          .type('application/json')
          .serializer((s: string) => s)
          .send('{"data":[],"next_cursor":null}');
      }
      const page = await deps.store.eventList({
        tenantId,
        type: req.query.type ?? null,
        limit: req.query.limit,
        cursor: req.query.cursor ?? null,
      });
      const body = `{"data":[${page.data.map(eventJson).join(',')}],"next_cursor":${JSON.stringify(page.nextCursor)}}`;
      return reply
        .type('application/json')
        .serializer((s: string) => s)
        .send(body);
    },
  );
};
