/**
 * Control-plane schemas: endpoints, secrets, step-up, delivery history, public documents. Kept apart from schemas.ts
 * because intake imports that file, and the capture plane must have no import path to endpoint or delivery rules
 * (ADR-01, scripts/check-boundaries.ts).
 */
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import {
  DEFAULT_MAX_CONCURRENCY,
  DEFAULT_ROTATION_OVERLAP_SECONDS,
  EVENT_TYPE_FILTER_MAX,
  EVENT_TYPE_FILTER_PATTERN,
  HEADER_NAME_PATTERN,
  HEADER_VALUE_PATTERN,
  MAX_CONCURRENCY,
  MAX_CUSTOM_HEADER_BYTES,
  MAX_CUSTOM_HEADERS,
  MAX_DESCRIPTION_LENGTH,
  MAX_HEADER_NAME_LENGTH,
  MAX_ROTATION_OVERLAP_SECONDS,
  MAX_URL_LENGTH,
} from '../app/manage-endpoints.ts';
import { EVENT_TYPE_MAX, EVENT_TYPE_PATTERN } from '../domain/event-rules.ts';
import { MAX_EVENT_TYPE_FILTERS } from '../domain/event-types.ts';
import { REPLAY_CONFIRM_ABOVE, REPLAY_MAX_PER_REQUEST, REPLAYABLE_STATUSES } from '../domain/replay.ts';
import { EventAccepted, iso, listQuery, Timestamp } from './schemas.ts';

// ---------------------------------------------------------------------------------------------------------------
// Endpoints and secrets
// ---------------------------------------------------------------------------------------------------------------

const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

const OrderingSchema = Type.Union(
  [Type.Literal('none'), Type.Literal('endpoint'), Type.Literal('resource')],
  {
    description:
      '`none`: any order, in parallel. `endpoint`: strict accept order, one in flight; a failing delivery blocks ' +
      'the ones after it. `resource`: strict order within each `resource_id`. The answer explains the choice in ' +
      '`ordering_note`.',
  },
);

const EventTypeFilters = Type.Array(
  Type.String({ minLength: 1, maxLength: EVENT_TYPE_FILTER_MAX, pattern: EVENT_TYPE_FILTER_PATTERN }),
  {
    minItems: 1,
    maxItems: MAX_EVENT_TYPE_FILTERS,
    uniqueItems: true,
    description: 'Exact types (`order.created`), prefixes (`order.*`, not matching `order` itself) or `*`.',
  },
);

const MaxConcurrency = Type.Integer({
  minimum: 1,
  maximum: MAX_CONCURRENCY,
  description: `Deliveries in flight to this endpoint at once (default ${DEFAULT_MAX_CONCURRENCY}).`,
});

const CustomHeaders = Type.Record(
  Type.String({ pattern: HEADER_NAME_PATTERN, maxLength: MAX_HEADER_NAME_LENGTH }),
  Type.String({ pattern: HEADER_VALUE_PATTERN, maxLength: MAX_CUSTOM_HEADER_BYTES }),
  {
    maxProperties: MAX_CUSTOM_HEADERS,
    additionalProperties: false,
    description:
      `Sent with every delivery (at most ${MAX_CUSTOM_HEADERS}, names and values together at most ` +
      `${MAX_CUSTOM_HEADER_BYTES} bytes; names are stored lower-case). Refused: hop-by-hop and framing headers, ` +
      'host, expect, content-type, content-length, content-encoding, accept-encoding (responses are always asked ' +
      'for uncompressed), user-agent and webhook-*, the forwarding headers (forwarded, x-forwarded-*, ' +
      'x-real-ip) and cloud metadata and API headers (metadata, metadata-flavor, x-google-metadata-request, ' +
      'x-aws-ec2-metadata-token*, x-amz-*, x-goog-*, x-azure-*). `authorization` is allowed. Not sent after a redirect ' +
      'to another origin. Stored and shown in clear.',
  },
);

const EndpointUrl = Type.String({
  minLength: 1,
  maxLength: MAX_URL_LENGTH,
  description: 'http or https, without credentials; stored in canonical form.',
});
const Description = Type.String({ maxLength: MAX_DESCRIPTION_LENGTH });

export const EndpointCreate = Type.Object(
  {
    url: EndpointUrl,
    description: Type.Optional(Description),
    event_types: EventTypeFilters,
    ordering: Type.Optional(OrderingSchema),
    max_concurrency: Type.Optional(MaxConcurrency),
    headers: Type.Optional(CustomHeaders),
  },
  { additionalProperties: false },
);

export const EndpointPatch = Type.Object(
  {
    url: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_URL_LENGTH,
        description: 'Changing the URL is an elevated action: send a fresh `X-Step-Up-Token`.',
      }),
    ),
    description: Type.Optional(Type.Union([Description, Type.Null()])),
    event_types: Type.Optional(EventTypeFilters),
    ordering: Type.Optional(OrderingSchema),
    max_concurrency: Type.Optional(MaxConcurrency),
    headers: Type.Optional(CustomHeaders),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const StepUpHeaders = Type.Object({
  'x-step-up-token': Type.Optional(
    Type.String({ description: 'From POST /v1/auth/step-up; required when the change is elevated.' }),
  ),
});

const endpointProperties = {
  id: Type.String(),
  tenant_id: Type.String(),
  url: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  event_types: Type.Array(Type.String()),
  ordering: OrderingSchema,
  ordering_note: Type.String({ description: 'What the ordering choice means, in plain words.' }),
  max_concurrency: Type.Integer(),
  headers: Type.Record(Type.String(), Type.String()),
  status: Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
};

export const Endpoint = Type.Object(endpointProperties);

const secretProperties = {
  id: Type.String(),
  created_at: Timestamp,
  active_from: Timestamp,
  active_until: Type.Union([Timestamp, Type.Null()], {
    description: 'null: active until a rotation sets an end.',
  }),
};

export const SecretMetadata = Type.Object(secretProperties);

export const SecretList = Type.Object({
  data: Type.Array(SecretMetadata),
  next_cursor: Type.Null({
    description: 'Always null: at most two secrets are active, so the list is one page.',
  }),
});

export const SecretCreated = Type.Object({
  ...secretProperties,
  secret: Type.String({ description: 'The signing secret (`whsec_…`). Shown once, never again.' }),
});

export const EndpointCreated = Type.Object({
  ...endpointProperties,
  secret: SecretCreated,
});

export const EndpointListQuery = Type.Composite(
  [
    listQuery('endpoint'),
    Type.Object({
      tenant_id: Type.Optional(
        Type.String({ minLength: 1, maxLength: 64, description: 'Operator only: one tenant.' }),
      ),
    }),
  ],
  { additionalProperties: false },
);

export const EndpointEnable = Type.Object(
  {
    backlog: Type.Union([Type.Literal('deliver'), Type.Literal('skip'), Type.Literal('resume_from')], {
      description:
        'Required: what happens to the backlog kept while the endpoint was disabled (ADR-14). `deliver` — send the ' +
        'pending deliveries and re-queue the dead letters of the failure streak (same webhook-id), ramped; `skip` — ' +
        'mark pending deliveries skipped (kept as records); `resume_from` — skip events accepted before ' +
        '`resume_from`, deliver the rest. Check GET /v1/endpoints/:id/backlog first.',
    }),
    resume_from: Type.Optional(
      Type.String({ format: 'date-time', description: 'Required with `resume_from`.' }),
    ),
  },
  { additionalProperties: false },
);

export const EndpointEnabled = Type.Object({
  endpoint: Endpoint,
  requeued: Type.Integer({ description: 'Deliveries now due (pending and re-queued dead letters).' }),
  skipped: Type.Integer(),
});

const ReplayStatus = Type.Union(REPLAYABLE_STATUSES.map((x) => Type.Literal(x)));

export const EndpointReplay = Type.Object(
  {
    status: Type.Optional(
      Type.Array(ReplayStatus, {
        minItems: 1,
        uniqueItems: true,
        description:
          'Which finished deliveries to replay (default `["dead"]`). Cancelled deliveries are never replayed: an ' +
          'acknowledged unsubscribe binds.',
      }),
    ),
    since: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'Deliveries created at or after this time (default: all).',
      }),
    ),
    until: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'Deliveries created before this time (default: now).',
      }),
    ),
    confirm: Type.Optional(
      Type.Boolean({
        description: `Required when more than ${REPLAY_CONFIRM_ABOVE} deliveries match; without it the answer is 409 \`confirmation_required\` with \`details.count\` and \`details.estimated_seconds\`, and nothing changes.`,
      }),
    ),
    expected_count: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          'The count the caller was shown (`details.count` of the 409) and confirms: if more match now (deliveries ' +
          'that finished since), the answer is 409 `confirmation_required` again with the new count, and nothing ' +
          'changes. Fewer is fine (some were replayed meanwhile).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EndpointReplayed = Type.Object({
  id: Type.String({ description: 'This replay request (`rpl_…`), as named in the audit trail.' }),
  endpoint_id: Type.String(),
  status: Type.Array(ReplayStatus),
  since: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  until: Type.String({ format: 'date-time' }),
  count: Type.Integer({
    description:
      'Replays created now, oldest first: new deliveries with the original webhook-id, of deliveries that matched ' +
      'the filter and had not been replayed before.',
  }),
  more: Type.Boolean({
    description: `Whether more deliveries match: at most ${REPLAY_MAX_PER_REQUEST} are replayed per request; ask again for the rest.`,
  }),
  first_due_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  last_due_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  rate_per_second: Type.Number({ description: 'The per-endpoint replay rate the due times follow.' }),
  estimated_seconds: Type.Integer({
    description: 'Estimated time to send them (see GET /v1/endpoints/:id/backlog).',
  }),
  created_at: Type.String({ format: 'date-time' }),
});

export const EmptyBody = Type.Object({}, { additionalProperties: false });

/**
 * Route hook for POSTs whose body is optional: no body at all counts as `{}`, so the strict schema still refuses
 * unknown fields when a body is sent. A body that is JSON `null` is a body, and not an object: refused by the
 * schema like any other, never read as "no options" (a replay of everything).
 */
export const bodyOptional = async (req: FastifyRequest) => {
  if (req.body === undefined) req.body = {};
};

export const SecretRotate = Type.Object(
  {
    overlap_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_ROTATION_OVERLAP_SECONDS,
        description: `How long the previous secret keeps signing (default ${DEFAULT_ROTATION_OVERLAP_SECONDS}, 7 days).`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const SecretRotated = Type.Object({
  ...secretProperties,
  secret: Type.String({ description: 'The new signing secret (`whsec_…`). Shown once, never again.' }),
  previous: Type.Union([Type.Object({ id: Type.String(), active_until: NullableTimestamp }), Type.Null()], {
    description: 'The secret that keeps signing during the overlap; null with overlap_seconds 0.',
  }),
});

export const SecretParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  sid: Type.String({ minLength: 1, maxLength: 64 }),
});

// ---------------------------------------------------------------------------------------------------------------
// Step-up
// ---------------------------------------------------------------------------------------------------------------

export const StepUpRequest = Type.Object(
  { totp: Type.String({ pattern: '^[0-9]{6}$', description: 'The current 6-digit code.' }) },
  { additionalProperties: false },
);

export const StepUpToken = Type.Object({
  token: Type.String({ description: 'Send as `X-Step-Up-Token` on elevated calls.' }),
  expires_at: Timestamp,
});

// ---------------------------------------------------------------------------------------------------------------
// Delivery history
// ---------------------------------------------------------------------------------------------------------------

const DeliveryStatusSchema = Type.Union([
  Type.Literal('pending'),
  Type.Literal('delivered'),
  Type.Literal('dead'),
  Type.Literal('cancelled'),
  Type.Literal('skipped'),
]);

export const Delivery = Type.Object({
  id: Type.String(),
  tenant_id: Type.String(),
  endpoint_id: Type.String(),
  event_id: Type.String(),
  event_type: Type.String(),
  resource_id: Type.Union([Type.String(), Type.Null()]),
  webhook_id: Type.String({ description: 'The `webhook-id` header: identical on every attempt and replay.' }),
  status: DeliveryStatusSchema,
  status_reason: Type.Union([Type.String(), Type.Null()]),
  attempts: Type.Integer(),
  next_attempt_at: NullableTimestamp,
  first_attempt_at: NullableTimestamp,
  last_attempt_at: NullableTimestamp,
  replayed_from: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const DeliveryListQuery = Type.Composite(
  [listQuery('delivery'), Type.Object({ status: Type.Optional(DeliveryStatusSchema) })],
  { additionalProperties: false },
);

const Outcome = Type.Union([Type.Literal('delivered'), Type.Literal('retryable'), Type.Literal('permanent')]);
const HeaderRecord = Type.Record(Type.String(), Type.String());

const Timings = Type.Object({
  due_at: Timestamp,
  started_at: Timestamp,
  finished_at: Timestamp,
  queue_ms: Type.Integer({ description: 'Waiting in the queue after the attempt was due.' }),
  platform_ms: Type.Integer({
    description: 'Hookrail before the request was on the wire (signing, connect).',
  }),
  consumer_ms: Type.Union([Type.Integer(), Type.Null()], {
    description:
      'Request on the wire until the answer was read (headers and body, at most 64 KiB of it); null without a ' +
      'response.',
  }),
});

export const AttemptSummary = Type.Object({
  id: Type.String(),
  delivery_id: Type.String(),
  attempt_no: Type.Integer(),
  url: Type.String(),
  outcome: Outcome,
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  error_class: Type.Union([Type.String(), Type.Null()]),
  error_message: Type.Union([Type.String(), Type.Null()]),
  timings: Timings,
});

export const AttemptDetail = Type.Object({
  id: Type.String(),
  tenant_id: Type.String(),
  endpoint_id: Type.String(),
  delivery_id: Type.String(),
  attempt_no: Type.Integer(),
  outcome: Outcome,
  error_class: Type.Union([Type.String(), Type.Null()]),
  error_message: Type.Union([Type.String(), Type.Null()]),
  request: Type.Object({
    method: Type.Literal('POST'),
    url: Type.String(),
    hops: Type.Array(
      Type.Object({
        url: Type.String(),
        headers: HeaderRecord,
        status: Type.Union([Type.Integer(), Type.Null()]),
      }),
      {
        description:
          'Every request sent, redirects included, with exactly the headers sent (signatures too).',
      },
    ),
    body: Type.Union([Type.String(), Type.Null()], {
      description:
        'The exact body bytes (UTF-8 JSON), identical on every attempt; null once the event is no longer kept ' +
        '(retention).',
    }),
    body_size: Type.Union([Type.Integer(), Type.Null()]),
  }),
  response: Type.Union([
    Type.Object({
      status: Type.Union([Type.Integer(), Type.Null()]),
      headers: HeaderRecord,
      body_base64: Type.String({ description: 'The first 4 KiB of the response body.' }),
      body_text: Type.Union([Type.String(), Type.Null()], {
        description: 'The same bytes as text when they are UTF-8 (a character cut at 4 KiB is dropped).',
      }),
    }),
    Type.Null(),
  ]),
  timings: Timings,
});

// ---------------------------------------------------------------------------------------------------------------
// Public documents
// ---------------------------------------------------------------------------------------------------------------

const Seconds = Type.Number();
export const RetrySchedule = Type.Object({
  version: Type.Literal(1),
  max_attempts: Type.Integer(),
  max_age_seconds: Seconds,
  jitter: Type.Literal('full'),
  base_delay_seconds: Seconds,
  max_delay_seconds: Seconds,
  retry_after_cap_seconds: Seconds,
  retry_after_statuses: Type.Array(Type.Integer()),
  connect_timeout_seconds: Seconds,
  attempt_timeout_seconds: Seconds,
  attempts: Type.Array(
    Type.Object({
      attempt: Type.Integer(),
      max_wait_seconds: Seconds,
      expected_wait_seconds: Seconds,
    }),
  ),
  expected_total_span_seconds: Seconds,
  worst_case_total_span_seconds: Seconds,
  worst_case_total_span_with_retry_after_seconds: Seconds,
  delivered: Type.Object({ statuses: Type.Array(Type.String()) }),
  retryable: Type.Object({ statuses: Type.Array(Type.String()), errors: Type.Array(Type.String()) }),
  permanent: Type.Object({ statuses: Type.String(), errors: Type.Array(Type.String()) }),
});

export const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms));

export const TestEventRequest = Type.Object(
  {
    type: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: EVENT_TYPE_MAX,
        pattern: EVENT_TYPE_PATTERN,
        description: 'The event type (default `hookrail.test`); the endpoint need not subscribe to it.',
      }),
    ),
    data: Type.Optional(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description: 'The event data (default: a short message naming the endpoint); delivered verbatim.',
        },
      ),
    ),
  },
  { additionalProperties: false },
);

export const TestEventSent = Type.Object({
  event: EventAccepted,
  delivery: Delivery,
});
