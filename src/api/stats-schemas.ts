/**
 * Schemas of GET /v1/endpoints/:id/stats (src/api/routes/operations.ts): an endpoint's time series for the
 * console's charts. What the buckets hold and how the backlog history is derived: domain/endpoint-series.ts.
 */
import { Type } from '@sinclair/typebox';
import { DEFAULT_SERIES_WINDOW, SERIES_WINDOWS } from '../domain/endpoint-series.ts';

const Mean = (description: string) =>
  Type.Union([Type.Number(), Type.Null()], {
    description: `${description}: the mean over the bucket's attempts, to 0.1 ms; null when there is none`,
  });

export const StatsQuery = Type.Object(
  {
    window: Type.Optional(
      Type.Union(
        SERIES_WINDOWS.map((w) => Type.Literal(w)),
        {
          default: DEFAULT_SERIES_WINDOW,
          description: '`1h`: 12 buckets of 5 minutes; `24h`: 24 of 1 hour; `7d`: 28 of 6 hours.',
        },
      ),
    ),
  },
  { additionalProperties: false },
);

const StatsBucket = Type.Object({
  start: Type.String({
    format: 'date-time',
    description: 'Start of the bucket: a multiple of `bucket_seconds` since the Unix epoch.',
  }),
  attempts: Type.Integer({
    description:
      'Attempts sent that started in the bucket (`circuit_open` and `platform_error` records are not sent: ' +
      'not counted).',
  }),
  delivered: Type.Integer({ description: 'Of those, delivered.' }),
  success_rate_percent: Type.Union([Type.Number(), Type.Null()], {
    description: 'delivered / attempts × 100, to 2 decimals; null without attempts.',
  }),
  latency_ms: Type.Object({
    queue: Mean('Hookrail: due → start of attempt'),
    platform: Mean('Hookrail: start of attempt → request on the wire'),
    consumer: Mean('Your endpoint: request on the wire → response (attempts that got one)'),
  }),
  dead_lettered: Type.Integer({ description: 'Deliveries that became dead letters in the bucket.' }),
  backlog: Type.Integer({
    description:
      'Pending deliveries (leased or not, as `backlog.depth` of the health answer) at the end of the bucket; for ' +
      'the last bucket, now. Derived from the deliveries now pending and when deliveries were created and left ' +
      '`pending` since, not sampled (docs/failure-handling.md, "Time series").',
  }),
});

export const EndpointStats = Type.Object({
  endpoint_id: Type.String(),
  window: Type.Union(SERIES_WINDOWS.map((w) => Type.Literal(w))),
  bucket_seconds: Type.Integer({ description: '300 (1h), 3600 (24h) or 21600 (7d).' }),
  from: Type.String({ format: 'date-time', description: 'Start of the first bucket.' }),
  to: Type.String({ format: 'date-time', description: 'Now: the last bucket holds it and is partial.' }),
  buckets: Type.Array(StatsBucket, { description: 'Oldest first, 12, 24 or 28 of them.' }),
});
