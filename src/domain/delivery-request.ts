/**
 * The delivery request of PRODUCT.md §4. The body is a pure function of the immutable accepted event, so it is
 * byte-identical on every attempt and every replay without being copied per delivery: the event's `data` is
 * canonical JSON text fixed at intake and is embedded verbatim.
 */
import { signatureHeader } from './signature.ts';

export interface DeliveryEvent {
  id: string;
  type: string;
  createdAt: number;
  /** Canonical JSON text of the event's data. */
  data: string;
}

export function deliveryBody(event: DeliveryEvent): Buffer {
  return Buffer.from(
    `{"id":${JSON.stringify(event.id)},"type":${JSON.stringify(event.type)},` +
      `"timestamp":"${new Date(event.createdAt).toISOString()}","data":${event.data}}`,
    'utf8',
  );
}

export interface RequestHeadersInput {
  webhookId: string;
  /** Time of this attempt (or redirect hop), ms. */
  nowMs: number;
  body: Buffer;
  /** Active `whsec_` secrets, newest first. */
  secrets: readonly string[];
  userAgent: string;
  /** The endpoint's custom headers; omitted once a redirect left the endpoint's origin. */
  customHeaders: Record<string, string> | null;
}

export function deliveryHeaders(input: RequestHeadersInput): Record<string, string> {
  const timestamp = Math.floor(input.nowMs / 1000);
  return {
    ...(input.customHeaders ?? {}),
    'content-type': 'application/json',
    'user-agent': input.userAgent,
    'webhook-id': input.webhookId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(input.secrets, input.webhookId, timestamp, input.body),
  };
}
