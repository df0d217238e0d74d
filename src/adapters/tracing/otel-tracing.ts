/**
 * The Tracing port on the OpenTelemetry SDK: a tracer provider of our own (never registered as the global one, so
 * two threads or two test instances in one process do not share or replace each other's), a BatchSpanProcessor
 * and the OTLP/HTTP exporter (JSON). Loaded with a dynamic import by bootstrap/create-tracing.ts, only when an
 * endpoint is configured.
 *
 * The SDK reads its other standard variables from the process environment itself: the sampler
 * (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`; default every span), span limits, the batch processor's queue
 * and delay (`OTEL_BSP_*`: a queue of 2,048 spans exported every 5 s in batches of 512 — spans beyond a full queue
 * are dropped, never waited for) and the exporter's headers, timeout, compression and certificates
 * (`OTEL_EXPORTER_OTLP_*`). `OTEL_RESOURCE_ATTRIBUTES` adds resource attributes; `service.name` is the configured
 * one (`OTEL_SERVICE_NAME`, default `hookrail`).
 *
 * No auto-instrumentation: it would patch node:http and undici, under the delivery client's timing.
 */
import {
  type Attributes,
  type Context,
  type HrTime,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_FULL,
} from '@opentelemetry/semantic-conventions';
import { judgesEndpoint } from '../../domain/outcome.ts';
import { traceParentParts } from '../../domain/trace-context.ts';
import type { AttemptCompletion, LeasedDelivery } from '../../ports/delivery-store.ts';
import type { TracedError, Tracing } from '../../ports/tracing.ts';

export const SPAN_ATTEMPT = 'hookrail.delivery.attempt';
export const SPAN_INTAKE_BATCH = 'hookrail.intake.batch';
export const SPAN_FANOUT_PASS = 'hookrail.fanout.pass';

/**
 * The producer's span (its traceparent, kept with the event) as the remote parent of each attempt's span: every
 * attempt of the event, retries and replays included, is a child of it. The SDK's default sampler is parent-based,
 * so an attempt follows the producer's sampled flag unless OTEL_TRACES_SAMPLER says otherwise.
 */
function producerContext(traceParent: string): Context {
  const p = traceParentParts(traceParent);
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: p.traceId,
    spanId: p.spanId,
    traceFlags: p.flags & TraceFlags.SAMPLED,
    isRemote: true,
  });
}

export interface OtelTracingOptions {
  /** The OTLP/HTTP traces URL (config.otlpTracesEndpoint). */
  url: string;
  serviceName: string;
  serviceVersion: string;
}

export function createOtelTracing(opts: OtelTracingOptions): Tracing {
  const resource = defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(
      resourceFromAttributes({
        [ATTR_SERVICE_NAME]: opts.serviceName,
        [ATTR_SERVICE_VERSION]: opts.serviceVersion,
      }),
    );
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: opts.url }))],
  });
  return new OtelTracing(provider, provider.getTracer('hookrail', opts.serviceVersion));
}

class OtelTracing implements Tracing {
  private stopped: Promise<void> | null = null;

  constructor(
    private readonly provider: BasicTracerProvider,
    private readonly tracer: Tracer,
  ) {}

  attemptFinished(leased: LeasedDelivery, completion: AttemptCompletion): void {
    const a = completion.attempt;
    const { delivery, event } = leased;
    const attributes: Attributes = {
      'hookrail.tenant.id': a.tenantId,
      'hookrail.endpoint.id': a.endpointId,
      'hookrail.delivery.id': a.deliveryId,
      'hookrail.event.id': event.id,
      'hookrail.event.type': event.type,
      'hookrail.webhook.id': delivery.webhookId,
      'hookrail.attempt.id': a.id,
      'hookrail.attempt.number': a.attemptNo,
      'hookrail.attempt.outcome': a.outcome,
      'hookrail.attempt.queue_ms': a.queueMs,
      'hookrail.attempt.platform_ms': a.platformMs,
      'hookrail.delivery.next_status': completion.next.status,
      'hookrail.delivery.replay': delivery.replayedFrom !== null,
    };
    if (a.errorClass !== null) attributes['hookrail.attempt.error_class'] = a.errorClass;
    if (a.consumerMs !== null) attributes['hookrail.attempt.consumer_ms'] = a.consumerMs;
    if (completion.probe) attributes['hookrail.attempt.probe'] = true;
    // An attempt that judges nothing of the endpoint (`circuit_open`, `platform_error`) sent nothing: an internal
    // span without the HTTP client attributes.
    const sent = judgesEndpoint(a.errorClass);
    if (sent) addHttpClientAttributes(attributes, a.url, a.attemptNo, a.statusCode, a.outcome, a.errorClass);
    const span = this.tracer.startSpan(
      SPAN_ATTEMPT,
      { kind: sent ? SpanKind.CLIENT : SpanKind.INTERNAL, startTime: hrTime(a.startedAt), attributes },
      event.traceParent ? producerContext(event.traceParent) : ROOT_CONTEXT,
    );
    if (a.outcome !== 'delivered') {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: a.errorMessage ?? (a.statusCode !== null ? `HTTP ${a.statusCode}` : (a.errorClass ?? '')),
      });
    }
    span.end(hrTime(a.finishedAt));
  }

  intakeBatch(b: {
    events: number;
    created: number;
    startedAt: number;
    finishedAt: number;
    error: TracedError | null;
  }): void {
    this.record(
      SPAN_INTAKE_BATCH,
      { 'hookrail.intake.events': b.events, 'hookrail.intake.created': b.created },
      b,
    );
  }

  fanoutPass(p: {
    events: number;
    deliveries: number;
    startedAt: number;
    finishedAt: number;
    error: TracedError | null;
  }): void {
    this.record(
      SPAN_FANOUT_PASS,
      { 'hookrail.fanout.events': p.events, 'hookrail.fanout.deliveries': p.deliveries },
      p,
    );
  }

  /**
   * Flushes the batch processor's queue (bounded by OTEL_EXPORTER_OTLP_TIMEOUT per export) and stops. Never fails:
   * spans the collector does not take are dropped, as they are while running, and a stop must still close the
   * stores and exit cleanly.
   */
  shutdown(): Promise<void> {
    this.stopped ??= this.provider.shutdown().catch(() => {});
    return this.stopped;
  }

  private record(
    name: string,
    attributes: Attributes,
    t: { startedAt: number; finishedAt: number; error: TracedError | null },
  ): void {
    if (t.error !== null) attributes[ATTR_ERROR_TYPE] = errorType(t.error);
    const span = this.tracer.startSpan(name, {
      kind: SpanKind.INTERNAL,
      startTime: hrTime(t.startedAt),
      attributes,
    });
    if (t.error !== null) {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: t.error instanceof Error ? t.error.message : String(t.error),
      });
    }
    span.end(hrTime(t.finishedAt));
  }
}

/**
 * The HTTP client semantic conventions for the attempt's first hop (redirects are in the attempt log, not in the
 * trace). The query string is cut from `url.full`: customers put tokens there, and a trace goes to a third party.
 * Registered URLs carry no user information (the URL policy refuses it), so nothing else is redacted.
 */
function addHttpClientAttributes(
  attributes: Attributes,
  url: string,
  attemptNo: number,
  statusCode: number | null,
  outcome: string,
  errorClass: string | null,
): void {
  attributes[ATTR_HTTP_REQUEST_METHOD] = 'POST';
  const cut = url.search(/[?#]/);
  attributes[ATTR_URL_FULL] = cut === -1 ? url : `${url.slice(0, cut)}${url[cut] === '?' ? '?REDACTED' : ''}`;
  try {
    const u = new URL(url);
    attributes[ATTR_SERVER_ADDRESS] = u.hostname.replace(/^\[|\]$/g, '');
    attributes[ATTR_SERVER_PORT] = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  } catch {
    // A stored URL that no longer parses failed before sending; the attempt's error class says so.
  }
  if (attemptNo > 1) attributes[ATTR_HTTP_REQUEST_RESEND_COUNT] = attemptNo - 1;
  if (statusCode !== null) attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = statusCode;
  // error.type: the status code for an answer that failed, else the transport error class (timeout, network …).
  if (outcome !== 'delivered')
    attributes[ATTR_ERROR_TYPE] =
      errorClass === 'http_status' && statusCode !== null ? String(statusCode) : (errorClass ?? '_OTHER');
}

function errorType(err: TracedError): string {
  if (err instanceof Error) return err.name !== 'Error' ? err.name : err.constructor.name;
  return '_OTHER';
}

/**
 * Epoch milliseconds as the SDK's [seconds, nanoseconds]. A plain number would do for the system clock, but the
 * SDK takes a number below the process's start time for a `performance.now()` reading: a test's fake clock set in
 * the past would be read as one.
 */
function hrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}
