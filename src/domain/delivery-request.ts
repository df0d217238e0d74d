/**
 * The delivery request of PRODUCT.md §4. The body is a pure function of the immutable accepted event, so it is
 * byte-identical on every attempt and every replay without being copied per delivery: the event's `data` is the
 * JSON text the producer sent, kept at intake, and is embedded verbatim — never parsed and re-serialised, which
 * would change digits beyond 2^53, `1.10`, `-0`, escapes and duplicate keys.
 */
import { signatureHeader } from './signature.ts';

export interface DeliveryEvent {
  id: string;
  type: string;
  createdAt: number;
  /** The event's data: its JSON text exactly as accepted. */
  data: string;
}

export function deliveryBody(event: DeliveryEvent): Buffer {
  // Written into the buffer in three parts rather than joined into one string first: the data is most of the
  // body, and the joined string was a copy of it made on every attempt only to be encoded and dropped.
  const head =
    `{"id":${JSON.stringify(event.id)},"type":${JSON.stringify(event.type)},` +
    `"timestamp":"${new Date(event.createdAt).toISOString()}","data":`;
  const headBytes = Buffer.byteLength(head, 'utf8');
  const dataBytes = Buffer.byteLength(event.data, 'utf8');
  const body = Buffer.allocUnsafe(headBytes + dataBytes + 1);
  body.write(head, 0, 'utf8');
  body.write(event.data, headBytes, 'utf8');
  body[headBytes + dataBytes] = 0x7d; // '}'
  return body;
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
