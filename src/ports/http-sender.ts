/**
 * The delivery plane's only way out to the network. The adapter (src/adapters/http) owns the address guard
 * (ADR-11/12): every address it dials is checked inside the connect path, redirects are followed by hand.
 */
import type { ErrorClass } from '../domain/outcome.ts';

export interface OutboundRequest {
  url: string;
  body: Buffer;
  /**
   * Headers for one hop, built fresh for each: the signature covers `webhook-timestamp`, which is the time of this
   * hop, so a redirected request is re-signed rather than forwarded. `sameOrigin` is false once a redirect left the
   * endpoint's origin; the builder then omits the endpoint's custom headers.
   */
  headersFor(hop: { url: string; sameOrigin: boolean }): Record<string, string>;
}

export interface HopRecord {
  url: string;
  /** Exactly the headers sent on this hop. */
  requestHeaders: Record<string, string>;
  status: number | null;
}

export interface SendTimings {
  /** When send() was called (ms epoch). */
  startedAt: number;
  /** When the last hop's request was fully written to the socket; null if it never was. */
  wireAt: number | null;
  /** When the final response's headers arrived; null without a response. */
  responseAt: number | null;
  /** When the exchange ended: the final response's body read (or cut at 64 KiB), or the failure. */
  finishedAt: number;
}

export type SendResult =
  | {
      kind: 'response';
      status: number;
      headers: Record<string, string>;
      /** The first 4 KiB of the body (at most 64 KiB is read, then the connection is dropped). */
      bodyPrefix: Buffer;
      hops: HopRecord[];
      timings: SendTimings;
    }
  | {
      kind: 'error';
      errorClass: ErrorClass;
      /** Safe to show the tenant: never names resolved internal addresses. */
      message: string;
      hops: HopRecord[];
      timings: SendTimings;
    };

export interface HttpSender {
  send(req: OutboundRequest): Promise<SendResult>;
  close(): Promise<void>;
}

/** Registration-time check of a URL (friendly error); the authoritative check happens at connect. */
export interface DestinationChecker {
  /**
   * The URL policy the check applies (HOOKRAIL_HTTPS_ONLY): registration checks a URL's shape under it first, so a
   * shape refusal answers 400 and only a refusal of the destination itself answers 422.
   */
  readonly httpsOnly: boolean;
  check(url: string): Promise<{ ok: true; url: string } | { ok: false; reason: string }>;
}
