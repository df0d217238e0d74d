/**
 * Failure handling and evidence, per endpoint and per tenant: health, backlog, re-enable with a backlog choice,
 * replay, the notification channel and log, and the audit trail (with an NDJSON export).
 */
import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { readScope } from '../../app/auth.ts';
import {
  enableEndpoint,
  endpointBacklog,
  endpointHealth,
  endpointStats,
  type OperationsDeps,
  replayDelivery,
  replayEndpoint,
  sendTestEvent,
  setNotificationChannel,
} from '../../app/endpoint-operations.ts';
import { EndpointStatsCache } from '../../app/endpoint-stats-cache.ts';
import { requireTenant } from '../../app/manage-endpoints.ts';
import { STEP_UP_HEADER } from '../../app/step-up.ts';
import type { SeriesWindow } from '../../domain/endpoint-series.ts';
import { ApiError } from '../../domain/errors.ts';
import { rawJsonMember } from '../../domain/raw-json-member.ts';
import { REPLAY_CONFIRM_ABOVE, REPLAY_RATE_PER_SECOND, type ReplayableStatus } from '../../domain/replay.ts';
import type {
  AuditRecord,
  BacklogChoice,
  NotificationKind,
  NotificationRecord,
} from '../../ports/delivery-store.ts';
import type { ApiDeps } from '../build-api.ts';
import {
  bodyOptional,
  Delivery,
  EmptyBody,
  EndpointEnable,
  EndpointEnabled,
  EndpointReplay,
  EndpointReplayed,
  isoOrNull,
  StepUpHeaders,
  TestEventRequest,
  TestEventSent,
} from '../control-schemas.ts';
import { errorResponses, IdParams, iso, listOf, listQuery } from '../schemas.ts';
import { EndpointStats, StatsQuery } from '../stats-schemas.ts';
import { deliveryJson } from './deliveries.ts';
import { endpointJson } from './endpoints.ts';

const nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const Num = Type.Union([Type.Number(), Type.Null()]);
const Time = nullable(Type.String({ format: 'date-time' }));

const Health = Type.Object({
  endpoint_id: Type.String(),
  state: Type.Union(['healthy', 'degraded', 'failing', 'disabled'].map((s) => Type.Literal(s))),
  reasons: Type.Array(Type.String()),
  disabled_reason: nullable(Type.String()),
  circuit: Type.Object({
    state: Type.String(),
    consecutive_failures: Type.Integer(),
    opened_at: Time,
    next_probe_at: Time,
  }),
  concurrency: Type.Object({
    max: Type.Integer(),
    effective: Type.Integer({
      description: 'The cap in force now; lower than max while ramping after an outage.',
    }),
    in_flight: Type.Integer(),
    ramp_ends_at: Time,
  }),
  success_rate_percent: Type.Object({ last_hour: Num, last_24h: Num }),
  attempts: Type.Object({
    last_hour: Type.Integer(),
    last_24h: Type.Integer(),
    dead_letters_24h: Type.Integer(),
  }),
  latency_ms: Type.Object({
    queue: Type.Object(
      { p50: Num, p99: Num },
      {
        description:
          "Hookrail: due → start of attempt (waiting for a worker slot, the endpoint's cap or its recovery ramp)",
      },
    ),
    platform: Type.Object(
      { p50: Num, p99: Num },
      { description: 'Hookrail: start of attempt → request on the wire' },
    ),
    consumer: Type.Object(
      { p50: Num, p99: Num },
      { description: 'Your endpoint: request on the wire → response' },
    ),
  }),
  backlog: Type.Object({
    depth: Type.Integer(),
    dead_letters: Type.Integer(),
    oldest_pending_age_seconds: Num,
  }),
  last_success_at: Time,
  last_failure_at: Time,
  failing_since: Time,
  lane: Type.Union(
    [
      Type.Object({
        id: Type.String({
          description: '`shared:<n>` (by hash of the endpoint id) or `dedicated:<endpoint id>`',
        }),
        kind: Type.Union([Type.Literal('shared'), Type.Literal('dedicated')]),
        since: Time,
        previous: nullable(Type.String({ description: 'The lane before the last move' })),
        draining: Type.Integer({
          description:
            'Deliveries still in flight under the previous lane (the drain window of the last move)',
        }),
      }),
      Type.Null(),
    ],
    {
      description:
        'The queue lane the endpoint is served from (docs/architecture.md, "Queue lanes"); null until the ' +
        'first maintenance pass after an upgrade.',
    },
  ),
});

const Backlog = Type.Object({
  endpoint_id: Type.String(),
  status: Type.String(),
  count: Type.Integer(),
  pending: Type.Integer(),
  dead_letters: Type.Integer(),
  oldest_created_at: Time,
  estimated_drain_seconds: Type.Number({
    description: 'An estimate at the endpoint’s cap and recent latency.',
  }),
});

/** Every kind of notice, with what sends it (docs/failure-handling.md, Notices). */
const NOTIFICATION_KINDS: Record<NotificationKind, string> = {
  dead_letter: 'the first delivery that used up its retries in a rolling 24 h',
  permanent_failure: 'the first delivery the endpoint rejected outright in a rolling 24 h',
  digest: 'failures of one kind gathered since the last notice of that kind',
  recovered:
    'the endpoint left `failing` after a dead-letter or permanent-failure notice of that failure streak',
  disabled: 'the endpoint was disabled through the API',
  auto_disabled: 'the endpoint was disabled after 72 h of failures',
};

const Notification = Type.Object({
  id: Type.String(),
  endpoint_id: nullable(Type.String()),
  kind: Type.Union(
    Object.keys(NOTIFICATION_KINDS).map((k) => Type.Literal(k)),
    {
      description: Object.entries(NOTIFICATION_KINDS)
        .map(([k, v]) => `\`${k}\`: ${v}`)
        .join('; '),
    },
  ),
  subject: Type.String(),
  body: Type.String(),
  email_to: nullable(Type.String()),
  status: Type.String({
    description: '`pending` (in the outbox), `sent` (mailed), `logged` (no channel set)',
  }),
  attempts: Type.Integer(),
  last_error: nullable(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  sent_at: Time,
});

const Channel = Type.Object(
  { email: nullable(Type.String({ maxLength: 254, pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$' })) },
  { additionalProperties: false },
);

const AuditEvent = Type.Object({
  id: Type.String(),
  tenant_id: Type.String(),
  actor: Type.String(),
  action: Type.String(),
  target_type: Type.String(),
  target_id: Type.String(),
  details: Type.Record(Type.String(), Type.Unknown()),
  created_at: Type.String({ format: 'date-time' }),
});

const notificationJson = (n: NotificationRecord) => ({
  id: n.id,
  endpoint_id: n.endpointId,
  kind: n.kind,
  subject: n.subject,
  body: n.body,
  email_to: n.emailTo,
  status: n.status,
  attempts: n.attempts,
  last_error: n.lastError,
  created_at: iso(n.createdAt),
  sent_at: isoOrNull(n.sentAt),
});

const auditJson = (a: AuditRecord) => ({
  id: a.id,
  tenant_id: a.tenantId,
  actor: a.actor,
  action: a.action,
  target_type: a.targetType,
  target_id: a.targetId,
  details: a.details,
  created_at: iso(a.createdAt),
});

export const operationsRoutes = (api: ApiDeps) => async (app: FastifyInstance) => {
  const deps: OperationsDeps & Pick<ApiDeps, 'keys'> = {
    ...api,
    statsCache: api.statsCache ?? new EndpointStatsCache(),
  };

  app.get<{ Params: { id: string } }>(
    '/v1/endpoints/:id/health',
    {
      schema: {
        summary: 'Endpoint health: state, circuit, success rates, latency split, backlog, queue lane',
        description: 'Thresholds are documented in docs/failure-handling.md.',
        tags: ['failure-handling'],
        params: IdParams,
        response: { 200: Health, ...errorResponses(401, 403, 404) },
      },
    },
    async (req) => endpointHealth(deps, readScope(req.principal), req.params.id),
  );

  app.get<{ Params: { id: string }; Querystring: { window: SeriesWindow } }>(
    '/v1/endpoints/:id/stats',
    {
      schema: {
        summary:
          'Endpoint time series for charts: attempts, success rate, latency split, dead letters, backlog',
        description:
          'Buckets aligned on the Unix epoch, oldest first; the last one holds now. `window` (default `24h`): `1h` ' +
          '(12 × 5 min), `24h` (24 × 1 h) or `7d` (28 × 6 h). The backlog of each bucket is derived from the ' +
          'deliveries pending now and when deliveries were created and finished since (docs/failure-handling.md).',
        tags: ['failure-handling'],
        params: IdParams,
        querystring: StatsQuery,
        response: { 200: EndpointStats, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req) => endpointStats(deps, readScope(req.principal), req.params.id, req.query.window),
  );

  app.get<{ Params: { id: string } }>(
    '/v1/endpoints/:id/backlog',
    {
      schema: {
        summary: 'What is waiting for this endpoint, and how long delivering it would take',
        tags: ['failure-handling'],
        params: IdParams,
        response: { 200: Backlog, ...errorResponses(401, 403, 404) },
      },
    },
    async (req) => endpointBacklog(deps, readScope(req.principal), req.params.id),
  );

  app.post<{ Params: { id: string }; Body: { backlog: BacklogChoice['kind']; resume_from?: string } }>(
    '/v1/endpoints/:id/enable',
    {
      schema: {
        summary: 'Re-enable a disabled endpoint with an explicit backlog choice (tenant)',
        tags: ['failure-handling'],
        params: IdParams,
        body: EndpointEnable,
        response: { 200: EndpointEnabled, ...errorResponses(400, 401, 403, 404, 409, 415) },
      },
    },
    async (req) => {
      const tenantId = requireTenant(req.principal);
      const { backlog, resume_from } = req.body;
      let choice: BacklogChoice;
      if (backlog === 'resume_from') {
        const at = resume_from === undefined ? Number.NaN : Date.parse(resume_from);
        if (!Number.isFinite(at)) {
          throw new ApiError(
            'validation_failed',
            '`resume_from` (an ISO-8601 time) is required with this choice.',
            {
              field: 'resume_from',
            },
          );
        }
        choice = { kind: 'resume_from', at };
      } else {
        if (resume_from !== undefined) {
          throw new ApiError(
            'validation_failed',
            '`resume_from` is only allowed with backlog "resume_from".',
          );
        }
        choice = { kind: backlog };
      }
      const result = await enableEndpoint(deps, req.principal, tenantId, req.params.id, choice);
      return { endpoint: endpointJson(result.endpoint), requeued: result.requeued, skipped: result.skipped };
    },
  );

  app.post<{ Params: { id: string } }>(
    '/v1/deliveries/:id/replay',
    {
      schema: {
        summary: 'Replay one delivery: a new delivery of the same event with the original webhook-id',
        description:
          "Due at once, or 100 ms after the endpoint's latest pending replay: single and bulk replays share " +
          'the rate cap of 10 per second per endpoint. As in a bulk replay, a cancelled delivery (an acknowledged ' +
          'unsubscribe binds) and one whose event type the endpoint no longer subscribes to (a test event excepted: ' +
          'it was addressed to the endpoint) answer 409 ' +
          '`not_replayable` (`details.reason`: `cancelled` or `unsubscribed`) and change nothing; a deleted ' +
          'endpoint answers 409 `conflict`. The body is optional and takes no fields.',
        tags: ['failure-handling'],
        params: IdParams,
        body: EmptyBody,
        response: { 202: Delivery, ...errorResponses(401, 403, 404, 409) },
      },
      preValidation: bodyOptional,
    },
    async (req, reply) => {
      const tenantId = requireTenant(req.principal);
      const replay = await replayDelivery(deps, req.principal, tenantId, req.params.id);
      return reply.status(202).send(deliveryJson(replay));
    },
  );

  app.post<{
    Params: { id: string };
    Body: {
      status?: ReplayableStatus[];
      since?: string;
      until?: string;
      confirm?: boolean;
      expected_count?: number;
    };
  }>(
    '/v1/endpoints/:id/replay',
    {
      preValidation: bodyOptional,
      schema: {
        summary:
          "Replay an endpoint's dead letters (or other finished deliveries) in a time range, rate-capped",
        description:
          'Creates a new delivery with the original webhook-id for every matching delivery that was not replayed ' +
          'before and whose event type the endpoint still subscribes to, oldest first, due at the per-endpoint ' +
          `replay rate (${REPLAY_RATE_PER_SECOND}/s). More than ${REPLAY_CONFIRM_ABOVE} matches need ` +
          '`"confirm": true` (409 `confirmation_required` otherwise, with the count and the estimated time; nothing ' +
          'changes). With `expected_count`, the count confirmed, a request that now matches more answers 409 ' +
          '`confirmation_required` again with the new count. The body is optional: `{}` replays every dead letter.',
        tags: ['failure-handling'],
        params: IdParams,
        body: EndpointReplay,
        response: { 202: EndpointReplayed, ...errorResponses(400, 401, 403, 404, 409, 415) },
      },
    },
    async (req, reply) => {
      const tenantId = requireTenant(req.principal);
      const time = (field: 'since' | 'until') => {
        const v = req.body[field];
        if (v === undefined) return null;
        const at = Date.parse(v);
        if (!Number.isFinite(at)) {
          throw new ApiError('validation_failed', `\`${field}\` must be an ISO-8601 time.`, { field });
        }
        return at;
      };
      const answer = await replayEndpoint(deps, req.principal, tenantId, req.params.id, {
        statuses: req.body.status ?? ['dead'],
        since: time('since'),
        until: time('until'),
        confirm: req.body.confirm === true,
        expectedCount: req.body.expected_count ?? null,
      });
      return reply.status(202).send(answer);
    },
  );

  app.post<{ Params: { id: string }; Body: { type?: string; data?: Record<string, unknown> } }>(
    '/v1/endpoints/:id/test',
    {
      preValidation: bodyOptional,
      schema: {
        summary: 'Send a test event to this endpoint alone, through the normal delivery path (tenant)',
        description:
          "Records an event for this endpoint only and creates its delivery at once: signed with the endpoint's " +
          'secrets, retried on the schedule and recorded attempt by attempt like any other; follow it at ' +
          '`GET /v1/deliveries/:id`. The endpoint receives it whatever it subscribes to; no other endpoint does. ' +
          'A disabled endpoint answers 409. The body is optional. A `type` other than `hookrail.test` is an ' +
          'elevated action (403 `step_up_required` without a fresh step-up token in `X-Step-Up-Token`): the ' +
          'request is signed with the secrets the receiver trusts.',
        tags: ['failure-handling'],
        params: IdParams,
        headers: StepUpHeaders,
        body: TestEventRequest,
        response: { 202: TestEventSent, ...errorResponses(400, 401, 403, 404, 409, 415) },
      },
    },
    async (req, reply) => {
      const tenantId = requireTenant(req.principal);
      // Data given is stored and delivered as the bytes sent, like an event's (rawJsonMember).
      const dataText =
        req.body?.data !== undefined && req.bodyText !== null ? rawJsonMember(req.bodyText, 'data') : null;
      const { event, delivery } = await sendTestEvent(deps, req.principal, tenantId, req.params.id, {
        ...req.body,
        dataText,
        stepUpToken: req.headers[STEP_UP_HEADER],
      });
      return reply.status(202).send({
        event: { id: event.id, type: event.type, created_at: iso(event.createdAt) },
        delivery: deliveryJson(delivery),
      });
    },
  );

  app.get(
    '/v1/notification-channel',
    {
      schema: {
        summary: 'Where notifications are e-mailed (tenant)',
        tags: ['notifications'],
        response: { 200: Channel, ...errorResponses(401, 403) },
      },
    },
    async (req) => ({
      email: await deps.store.tenantNotificationEmail({ tenantId: requireTenant(req.principal) }),
    }),
  );

  app.put<{ Body: { email: string | null } }>(
    '/v1/notification-channel',
    {
      schema: {
        summary: 'Set the e-mail address for notifications (tenant); null turns e-mail off',
        description:
          'Notifications are always listed at GET /v1/notifications; e-mail is sent when this is set.',
        tags: ['notifications'],
        body: Channel,
        response: { 200: Channel, ...errorResponses(400, 401, 403, 415) },
      },
    },
    async (req) => {
      const by = { tenantId: requireTenant(req.principal), principal: req.principal };
      await setNotificationChannel(deps, by, req.body.email);
      return { email: req.body.email };
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string } }>(
    '/v1/notifications',
    {
      schema: {
        summary: 'Notifications sent (or listed) about your endpoints, newest first',
        tags: ['notifications'],
        querystring: listQuery('notification'),
        response: { 200: listOf(Notification), ...errorResponses(400, 401, 403) },
      },
    },
    async (req) => {
      const page = await deps.store.notificationList({
        tenantId: readScope(req.principal),
        limit: req.query.limit,
        cursor: req.query.cursor ?? null,
      });
      return { data: page.data.map(notificationJson), next_cursor: page.nextCursor };
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string } }>(
    '/v1/audit-events',
    {
      schema: {
        summary:
          'The append-only audit trail, newest first; `Accept: application/x-ndjson` streams all, oldest first',
        tags: ['audit'],
        querystring: listQuery('audit'),
        response: { 200: listOf(AuditEvent), ...errorResponses(400, 401, 403) },
      },
    },
    async (req, reply) => {
      const tenantId = readScope(req.principal);
      if ((req.headers.accept ?? '').includes('application/x-ndjson')) {
        // Export for the tenant's SIEM: every record, oldest first, one JSON object per line, streamed page by page.
        async function* lines() {
          let cursor: string | null = null;
          do {
            const page = await deps.store.auditList({ tenantId, limit: 500, cursor, ascending: true });
            for (const a of page.data) yield `${JSON.stringify(auditJson(a))}\n`;
            cursor = page.nextCursor;
          } while (cursor);
        }
        return reply.type('application/x-ndjson').send(Readable.from(lines()));
      }
      const page = await deps.store.auditList({
        tenantId,
        limit: req.query.limit,
        cursor: req.query.cursor ?? null,
      });
      return { data: page.data.map(auditJson), next_cursor: page.nextCursor };
    },
  );
};
