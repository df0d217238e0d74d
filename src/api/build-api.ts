/**
 * Builds the HTTP application without listening (tests use `app.inject()`; bootstrap calls `listen`).
 * Handlers are thin: authenticate, call a use case, shape the answer. Everything that can go wrong is answered
 * in the one error format of PRODUCT.md §2, with a code from the catalogue in src/domain/errors.ts.
 */
import { isUtf8 } from 'node:buffer';
import swagger from '@fastify/swagger';
import { Ajv } from 'ajv';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import type { Authenticator, Principal } from '../app/auth.ts';
import type { EndpointStatsCache } from '../app/endpoint-stats-cache.ts';
import type { GroupCommitter } from '../app/group-commit.ts';
import type { TenantDirectory } from '../app/tenant-directory.ts';
import { ApiError, ERRORS, type ErrorCode } from '../domain/errors.ts';
import { MAX_EVENT_BODY_BYTES } from '../domain/event-rules.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { DestinationChecker } from '../ports/http-sender.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { Metrics } from '../ports/metrics.ts';
import { type Store, StoreUnavailableError } from '../ports/store.ts';
import { bodyOptional } from './control-schemas.ts';
import { consoleRoutes } from './routes/console.ts';
import { deliveryRoutes } from './routes/deliveries.ts';
import { egressRangeRoutes } from './routes/egress-ranges.ts';
import { endpointRoutes } from './routes/endpoints.ts';
import { eventRoutes } from './routes/events.ts';
import { operationsRoutes } from './routes/operations.ts';
import { producerKeyRoutes } from './routes/producer-keys.ts';
import { publicRoutes } from './routes/public.ts';
import { secretRoutes } from './routes/secrets.ts';
import { stepUpRoutes } from './routes/step-up.ts';
import { systemRoutes } from './routes/system.ts';
import { tenantRoutes } from './routes/tenants.ts';
import { DOCUMENTED_HEADERS, ErrorBody, errorResponses, isRfc3339 } from './schemas.ts';

export interface ApiDeps {
  store: Store;
  clock: Clock;
  random: Random;
  keys: KeyService;
  /** The operator's step-up TOTP seed (bootstrap/admin-token.ts); null in a process that does not serve control. */
  operatorTotpSeed: Buffer | null;
  auth: Authenticator;
  tenants: TenantDirectory;
  /** Present when this process runs the intake role. */
  committer: GroupCommitter | null;
  logger: Logger | false;
  version: string;
  metrics: Metrics | null;
  /** Roles this process serves; routes of absent roles answer 404. */
  serves: { intake: boolean; control: boolean };
  /** Registration-time destination check (address guard); endpoints skip it when absent. */
  destinations?: DestinationChecker;
  /** Published egress ranges (config.egressRangesFile); the shipped example file when absent. */
  egressRangesFile?: string;
  /** Shared lanes new endpoints are hashed onto (config.sharedLanes; domain/lanes.ts default when absent). */
  sharedLanes?: number;
  /** Settled time-series buckets kept per process (built with config.leaseMs; one with the default lease when absent). */
  statsCache?: EndpointStatsCache;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
    /**
     * A JSON body's text, decoded as parsed (null for other requests): for the routes that keep part of it exactly
     * as sent — an event's `data` (domain/raw-json-member.ts).
     */
    bodyText: string | null;
  }
}

const STORE_RETRY_AFTER_S = 2;

/** Fastify's own error codes mapped onto the catalogue. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'validation_failed',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_VALIDATION: 'validation_failed',
};

export async function buildApi(deps: ApiDeps): Promise<FastifyInstance> {
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger as FastifyBaseLogger } : { logger: false }),
    bodyLimit: MAX_EVENT_BODY_BYTES,
    // Per-request log lines would dominate the log at intake rates; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    // The server's logger for every request instead of a child made per request: pino's child was ~3 % of the
    // intake thread's allocations (bench:delivery, SQLite). The error handler names the request id itself.
    childLoggerFactory: (logger) => logger,
    // Requests that arrive on kept-alive connections while closing get our own 503 (below), with Retry-After.
    return503OnClosing: false,
    // A path that is not valid percent-encoding, or a path parameter longer than any id, is refused by the router
    // before any hook runs: answered in the catalogue's envelope like every other bad request (nothing is read).
    frameworkErrors: (err, _req, reply) =>
      (reply as unknown as FastifyReply).status(400).send({
        error: {
          code: 'validation_failed',
          message:
            err.code === 'FST_ERR_MAX_PARAM_LENGTH'
              ? 'A path parameter is longer than any id.'
              : 'The request path is not valid.',
        },
      }),
  });

  // Bodies are validated strictly (no coercion, no silently removed fields); query strings are coerced because
  // everything in a URL is a string. Two compilers, one schema language.
  const strict = new Ajv({
    allErrors: false,
    coerceTypes: false,
    removeAdditional: false,
    useDefaults: false,
  });
  const lenient = new Ajv({ coerceTypes: true, removeAdditional: false, useDefaults: true });
  for (const ajv of [strict, lenient]) {
    ajv.addFormat('date-time', isRfc3339);
    ajv.addKeyword('example');
  }
  app.setValidatorCompiler(({ schema, httpPart }) => {
    // Request headers a route documents but checks itself (DOCUMENTED_HEADERS): no validator at all, so the
    // request's headers are not even read for one (POST /v1/events is the hot path).
    if (httpPart === 'headers' && (schema as Record<string, unknown>)[DOCUMENTED_HEADERS] === true) {
      return undefined as unknown as (data: unknown) => boolean;
    }
    return (httpPart === 'body' ? strict : lenient).compile(schema as object);
  });

  // JSON only, valid UTF-8 only: a replacement character silently substituted for a bad byte would change the
  // payload we promise to deliver verbatim. The decoded text is kept on the request (a reference, not a copy):
  // parsed values are for validation, and a route that must keep a part of the body verbatim takes it from the
  // text, since a parse/serialise round trip changes numbers, escapes and duplicate keys.
  app.decorateRequest('bodyText', null);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const buf = body as Buffer;
    // An empty body with a JSON content type is no body: on a route whose body is optional (taken as `{}`), and on
    // one that takes none (a DELETE sent by a client that always sets the header).
    if (
      buf.length === 0 &&
      ((req.routeOptions.config as { optionalBody?: boolean }).optionalBody ||
        req.routeOptions.schema?.body === undefined)
    )
      return done(null, undefined);
    if (!isUtf8(buf))
      return done(new ApiError('invalid_json', 'The request body is not valid UTF-8.'), undefined);
    const text = buf.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return done(new ApiError('invalid_json'), undefined);
    }
    req.bodyText = text;
    done(null, parsed);
  });

  app.addSchema(ErrorBody);

  app.setErrorHandler((err: FastifyError | ApiError, req, reply) => {
    let apiError: ApiError;
    if (err instanceof ApiError) apiError = err;
    else if (err instanceof StoreUnavailableError) {
      apiError = new ApiError('store_unavailable', undefined, undefined, STORE_RETRY_AFTER_S);
    } else if (err.code && FASTIFY_CODES[err.code]) {
      // A malformed list cursor (the only failure of a query string's `cursor`) has a code of its own.
      const code =
        err.validationContext === 'querystring' && err.validation?.every((v) => v.instancePath === '/cursor')
          ? 'invalid_cursor'
          : (FASTIFY_CODES[err.code] as ErrorCode);
      const details =
        err.validation && err.validation.length > 0
          ? {
              location: err.validationContext,
              issues: err.validation.map((v) => ({
                path: v.instancePath || '/',
                problem: v.message,
                ...(v.keyword === 'additionalProperties'
                  ? { field: (v.params as { additionalProperty?: string }).additionalProperty }
                  : {}),
              })),
            }
          : undefined;
      apiError = new ApiError(code, code === 'validation_failed' ? err.message : undefined, details);
    } else if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      apiError = new ApiError('validation_failed', err.message);
    } else {
      req.log.error({ err, reqId: req.id }, 'unhandled error');
      apiError = new ApiError('internal_error');
    }
    if (apiError.retryAfterSeconds !== undefined)
      reply.header('retry-after', String(apiError.retryAfterSeconds));
    return reply.status(apiError.status).send({
      error: {
        code: apiError.code,
        message: apiError.message,
        ...(apiError.details ? { details: apiError.details } : {}),
      },
    });
  });

  app.setNotFoundHandler((_req, reply) =>
    reply.status(404).send({ error: { code: 'route_not_found', message: ERRORS.route_not_found.message } }),
  );

  // What every route of its shape can answer, listed on each so that the document says so: 500, and 503 (an
  // unavailable store, a process shutting down; with Retry-After) anywhere; 400 where there are path or query
  // parameters or a body; 413 and 415 where there is a body. The statuses a handler answers itself are in its own
  // schema. Routes whose body is optional (bodyOptional) are marked optional in the document (transformObject).
  const optionalBodies = new Set<string>();
  app.addHook('onRoute', (route) => {
    const schema = route.schema;
    if (!schema || schema.hide) return;
    schema.response ??= {};
    const response = schema.response as Record<string, unknown>;
    const add = (...statuses: number[]) => {
      for (const [status, ref] of Object.entries(errorResponses(...statuses))) response[status] ??= ref;
    };
    add(500, 503);
    if (schema.params || schema.querystring) add(400);
    if (schema.body) add(400, 413, 415);
    if ([route.preValidation].flat().includes(bodyOptional)) {
      route.config = { ...route.config, optionalBody: true } as typeof route.config;
      for (const method of [route.method].flat()) optionalBodies.add(`${method.toLowerCase()} ${route.url}`);
    }
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Hookrail API',
        version: deps.version,
        description:
          'Webhook delivery: hand over events; Hookrail delivers them signed, retried and recorded.',
      },
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      },
      security: [{ bearer: [] }],
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (json.$id as string) ?? `def-${i}`,
    },
    transformObject: (document) => {
      if (!('openapiObject' in document)) return document.swaggerObject;
      const { openapiObject } = document;
      const paths = openapiObject.paths as
        | Record<string, Record<string, { requestBody?: object }>>
        | undefined;
      for (const key of optionalBodies) {
        const [method, url] = key.split(' ') as [string, string];
        const op = paths?.[url.replace(/:(\w+)/g, '{$1}')]?.[method];
        if (op?.requestBody) op.requestBody = { ...op.requestBody, required: false };
      }
      return openapiObject;
    },
  });

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });

  // Authentication for everything under /v1 except the public, machine-readable documents.
  app.addHook('onRequest', async (req, reply) => {
    if (closing) {
      reply.header('connection', 'close');
      throw new ApiError('shutting_down', undefined, undefined, 2);
    }
    // By the matched route, not the raw URL: the router decodes percent-encoding (`/%761/tenants` is /v1/tenants)
    // and accepts absolute-form targets. A URL that matched no route is judged by its raw form (a 404 after auth).
    // Read once: each read of routeOptions builds a new object (Fastify), and this runs on every request.
    const route = req.routeOptions;
    if (!(route.url ?? req.url).startsWith('/v1/')) return;
    if (route.config && (route.config as { public?: boolean }).public) return;
    req.principal = await deps.auth.authenticate(req.headers.authorization);
  });

  await app.register(systemRoutes(deps));
  if (deps.serves.control) {
    await app.register(tenantRoutes(deps));
    await app.register(producerKeyRoutes(deps));
    await app.register(endpointRoutes(deps));
    await app.register(secretRoutes(deps));
    await app.register(deliveryRoutes(deps));
    await app.register(stepUpRoutes(deps));
    await app.register(publicRoutes());
    await app.register(egressRangeRoutes(deps));
    await app.register(operationsRoutes(deps));
    await app.register(consoleRoutes());
  }
  await app.register(eventRoutes(deps));
  return app;
}
