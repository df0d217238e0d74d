/**
 * A minimal OTLP/HTTP traces receiver on loopback: takes what an exporter POSTs to /v1/traces as JSON (the
 * encoding of @opentelemetry/exporter-trace-otlp-http) and keeps the spans, flattened, with their resource's
 * attributes and their own as plain values.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

type AnyValue = {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
};
type KeyValue = { key: string; value: AnyValue };

export interface CollectedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's enum: 1 internal, 2 server, 3 client. */
  kind: number;
  /** Epoch milliseconds (the OTLP nanoseconds, divided). */
  startMs: number;
  endMs: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP's enum: 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string };
  resource: Record<string, string | number | boolean>;
  scope: string;
}

export class OtlpCollector {
  readonly spans: CollectedSpan[] = [];
  /** Every request's path and content type, in order. */
  readonly requests: Array<{ path: string; contentType: string }> = [];
  private server: Server;
  port = 0;

  private constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.requests.push({ path: req.url ?? '', contentType: req.headers['content-type'] ?? '' });
        if (req.url === '/v1/traces' && req.headers['content-type']?.startsWith('application/json')) {
          this.take(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
  }

  static async start(): Promise<OtlpCollector> {
    const c = new OtlpCollector();
    await new Promise<void>((resolve) => c.server.listen(0, '127.0.0.1', resolve));
    c.port = (c.server.address() as AddressInfo).port;
    return c;
  }

  /** The value for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  named(name: string): CollectedSpan[] {
    return this.spans.filter((s) => s.name === name);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private take(body: {
    resourceSpans?: Array<{
      resource?: { attributes?: KeyValue[] };
      scopeSpans?: Array<{ scope?: { name?: string }; spans?: Array<Record<string, any>> }>;
    }>;
  }): void {
    for (const rs of body.resourceSpans ?? []) {
      const resource = plain(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId || undefined,
            name: s.name,
            kind: s.kind,
            startMs: Number(BigInt(s.startTimeUnixNano) / 1_000_000n),
            endMs: Number(BigInt(s.endTimeUnixNano) / 1_000_000n),
            attributes: plain(s.attributes),
            status: s.status ?? { code: 0 },
            resource,
            scope: ss.scope?.name ?? '',
          });
        }
      }
    }
  }
}

function plain(attributes: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of attributes ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
  }
  return out;
}
