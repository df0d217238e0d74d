/**
 * Traces (part of the composition root): null without an OTLP endpoint, and then the OpenTelemetry SDK is never
 * imported — the adapter is loaded with a dynamic import, so a process without tracing neither loads nor
 * initialises it, and the loops it would be handed only test `if (tracing)`. Each thread that runs loops builds
 * its own (the pipeline thread too), with its own exporter, and shuts it down when it stops.
 */
import type { Config } from '../config/config.ts';
import type { Tracing } from '../ports/tracing.ts';
import { VERSION } from './version.ts';

export async function createTracing(
  config: Pick<Config, 'otlpTracesEndpoint' | 'otelServiceName'>,
): Promise<Tracing | null> {
  if (config.otlpTracesEndpoint === null) return null;
  const { createOtelTracing } = await import('../adapters/tracing/otel-tracing.ts');
  return createOtelTracing({
    url: config.otlpTracesEndpoint,
    serviceName: config.otelServiceName,
    serviceVersion: VERSION,
  });
}
