/**
 * Traces for an OpenTelemetry collector (PRODUCT.md §10), implemented with the OpenTelemetry SDK in
 * adapters/tracing/otel-tracing.ts. The SDK is loaded only when an OTLP endpoint is configured; otherwise callers
 * hold `null` and their hot paths pay one null check.
 *
 * Callers report work that has finished, with the start and end they measured on their own clock, rather than
 * holding a span open while it runs: an attempt in flight costs nothing here, and the times in a trace are the
 * times in the attempt log. A span therefore has millisecond precision (the clock's). An attempt's span is a child
 * of the producer's span when the event came with a W3C traceparent (kept with the event, read back by the lease);
 * every other span is a root (docs/operations.md).
 */
import type { AttemptCompletion, LeasedDelivery } from './delivery-store.ts';

/** A stage's failure, as the caller caught it; the adapter records its class and message, never a stack. */
export type TracedError = unknown;

export interface Tracing {
  /**
   * One delivery attempt, leased and made by a delivery worker (sent, failed before a response, or recorded as
   * `circuit_open` at lease time): the span runs from `attempt.startedAt` to `attempt.finishedAt`.
   */
  attemptFinished(leased: LeasedDelivery, completion: AttemptCompletion): void;
  /** One group-commit batch of intake, from its hand-over to the store to its durable commit (or failure). */
  intakeBatch(b: {
    events: number;
    /** Events the batch created; the rest answered an Idempotency-Key seen before. */
    created: number;
    startedAt: number;
    finishedAt: number;
    error: TracedError | null;
  }): void;
  /** One fan-out pass that took events (empty polls are not traced), or failed. */
  fanoutPass(p: {
    events: number;
    deliveries: number;
    startedAt: number;
    finishedAt: number;
    error: TracedError | null;
  }): void;
  /** Exports what is buffered and stops the exporter; spans reported afterwards are dropped. Never rejects. */
  shutdown(): Promise<void>;
}
