/**
 * Request and response schemas (TypeBox). The same objects validate requests, shape responses and generate the
 * OpenAPI document (docs/openapi.json), so the three cannot disagree.
 */
import { type TSchema, Type } from '@sinclair/typebox';
import { ERRORS } from '../domain/errors.ts';
import { EVENT_TYPE_MAX, EVENT_TYPE_PATTERN, RESOURCE_ID_MAX } from '../domain/event-rules.ts';
import { ID_PREFIXES, type IdKind } from '../domain/ids.ts';

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.Union(Object.keys(ERRORS).map((c) => Type.Literal(c))),
      message: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  },
  { $id: 'Error', description: 'Every error answer. Branch on `code`; `message` may be reworded.' },
);

/**
 * Marks a route's `headers` schema as documentation: it is published in the OpenAPI document, and the handler or use
 * case checks the headers itself (with error details of its own), so no validator is compiled for it (build-api.ts).
 */
export const DOCUMENTED_HEADERS = 'x-hookrail-documented-only';

export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [s, Type.Ref('Error')]));

/**
 * A list's query: `limit`, and `cursor` — the last id of the page before, of the list's own kind. A cursor of
 * another kind would still compare as a string (an endpoint id after every delivery id, say) and answer a page
 * that looks like the list's start or end, so it is refused as `invalid_cursor` like any other malformed one.
 */
export const listQuery = (kind: IdKind) =>
  Type.Object(
    {
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
      cursor: Type.Optional(
        Type.String({ minLength: 1, maxLength: 64, pattern: `^${ID_PREFIXES[kind]}_[0-9A-Z]{26}$` }),
      ),
    },
    { additionalProperties: false },
  );

export const listOf = (item: TSchema) =>
  Type.Object({ data: Type.Array(item), next_cursor: Type.Union([Type.String(), Type.Null()]) });

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export const Timestamp = Type.String({ format: 'date-time' });

/**
 * The `date-time` format: an RFC 3339 timestamp with a time and an offset (`2026-01-01T00:00:00Z`), a real date and
 * time. Date.parse alone rolls impossible values over (`2026-02-30` is read as March 2nd, `24:00` as the next day),
 * which would silently move a replay's range or a re-enable's `resume_from`; so every field is range-checked. A
 * leap second (`:60`) is refused: no clock here can stand on one.
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;
export const isRfc3339 = (s: string): boolean => {
  const m = RFC3339.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = month === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31;
  const offsetOk = m[8] === undefined || (Number(m[8]) <= 23 && Number(m[9]) <= 59);
  return (
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= days &&
    hour <= 23 &&
    minute <= 59 &&
    second <= 59 &&
    offsetOk
  );
};

export const Tenant = Type.Object(
  { id: Type.String(), name: Type.String(), created_at: Timestamp },
  { $id: 'Tenant' },
);

export const TenantCreate = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 200 }) },
  { additionalProperties: false },
);

export const TenantCreated = Type.Object({
  id: Type.String(),
  name: Type.String(),
  created_at: Timestamp,
  tenant_key: Type.String({ description: 'The tenant key (hkt_…). Shown once.' }),
  step_up: Type.Object({
    totp_seed: Type.String({ description: 'Base32 TOTP seed for step-up authentication. Shown once.' }),
    otpauth_uri: Type.String(),
  }),
});

export const ProducerKey = Type.Object(
  {
    id: Type.String(),
    name: Type.Union([Type.String(), Type.Null()]),
    prefix: Type.String(),
    created_at: Timestamp,
  },
  { $id: 'ProducerKey' },
);

export const ProducerKeyCreate = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) },
  { additionalProperties: false },
);

export const ProducerKeyCreated = Type.Object({
  id: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  prefix: Type.String(),
  created_at: Timestamp,
  key: Type.String({ description: 'The producer key (hkp_…). Shown once.' }),
});

export const EventCreate = Type.Object(
  {
    tenant_id: Type.String({ minLength: 1, maxLength: 64 }),
    type: Type.String({ minLength: 1, maxLength: EVENT_TYPE_MAX, pattern: EVENT_TYPE_PATTERN }),
    data: Type.Object(
      {},
      { additionalProperties: true, description: 'Any JSON object; delivered verbatim.' },
    ),
    resource_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: RESOURCE_ID_MAX,
        pattern: '^[\\x21-\\x7e]+$',
        description: 'Groups events about one entity, for `resource` ordering.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EventAccepted = Type.Object({ id: Type.String(), type: Type.String(), created_at: Timestamp });

export const Event = Type.Object(
  {
    id: Type.String(),
    tenant_id: Type.String(),
    type: Type.String(),
    resource_id: Type.Union([Type.String(), Type.Null()]),
    data: Type.Unknown({ description: 'The event data exactly as accepted.' }),
    created_at: Timestamp,
  },
  { $id: 'Event' },
);

export const EventListQuery = Type.Composite(
  [
    listQuery('event'),
    Type.Object({
      tenant_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
      type: Type.Optional(Type.String({ minLength: 1, maxLength: EVENT_TYPE_MAX })),
    }),
  ],
  { additionalProperties: false },
);

export const iso = (ms: number) => new Date(ms).toISOString();
