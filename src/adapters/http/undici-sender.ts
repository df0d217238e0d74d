/**
 * The delivery plane's HTTP client (PRODUCT.md §4, §5, §7): one POST per hop through the guarded agent, redirects
 * followed by hand, every limit enforced while reading rather than afterwards.
 *
 * Limits: connect 5 s (resolution + TCP + TLS); one deadline of 15 s over the whole attempt including every
 * redirect hop (undici's idle timers alone never fire on a 1-byte drip); at most 64 KiB of response body read,
 * then the connection is dropped without waiting for the rest; the first 4 KiB kept; response head ≤ 16 KiB.
 * Bodies are never decompressed (`accept-encoding: identity` is sent, and a server that compresses anyway only
 * ever costs us 64 KiB of compressed bytes).
 *
 * Once the final status line has arrived, the status decides (src/domain/outcome.ts): a body that then stalls
 * past the deadline, exceeds the read cap or is cut by a reset still yields a `response` with what was read.
 * Before the status line, the same events are transport errors.
 *
 * Redirects (ADR-12): 301, 302, 303, 307 and 308 are all followed with the same POST and the same body — a
 * webhook is the POST; turning it into a bodiless GET (what browsers do for 301/302 and what 303 asks for) would
 * make a receiver's 200 look like a delivery that never happened. Consumers dedupe on webhook-id. At most 3
 * redirects; each hop runs the URL policy again and connects through the same guard; https→http is refused; the
 * headers are rebuilt per hop by the caller (fresh timestamp and signature) and the endpoint's custom headers are
 * dropped for good once a hop leaves the endpoint's origin. Any other 3xx is returned as a response.
 */
import type { Dispatcher } from 'undici';
import { checkUrlShape, MAX_URL_LENGTH, networkPolicy, type UrlShape } from '../../domain/address-policy.ts';
import type { ErrorClass } from '../../domain/outcome.ts';
import {
  ATTEMPT_TIMEOUT_MS,
  CONNECT_TIMEOUT_MS,
  RESPONSE_READ_LIMIT_BYTES,
  RESPONSE_STORED_BYTES,
} from '../../domain/retry-schedule.ts';
import type {
  HopRecord,
  HttpSender,
  OutboundRequest,
  SendResult,
  SendTimings,
} from '../../ports/http-sender.ts';
import { createGuardedAgent, type RefusalListener, type Resolver } from './guarded-agent.ts';
import { systemResolver } from './system-resolver.ts';
import { AttemptTimeoutError, classifyTransportError } from './transport-errors.ts';

export const MAX_REDIRECTS = 3;

const FOLLOWED_REDIRECTS = new Set([301, 302, 303, 307, 308]);
// Headers the transport owns: undici rejects some, the rest would let a header builder desynchronise framing.
const TRANSPORT_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'accept-encoding',
]);

export interface UndiciSenderOptions {
  /** CIDRs delivery may reach although they are not public (HOOKRAIL_ALLOW_NETWORKS). Validated here. */
  allowNetworks?: readonly string[];
  /** HOOKRAIL_DENY_NETWORKS: public ranges refused all the same (the operator's own addresses). */
  denyNetworks?: readonly string[];
  /** Refuse plain http, on the stored URL and on every redirect hop. Default false. */
  httpsOnly?: boolean;
  /** Name resolution for the guard; default the hosts file, then c-ares (system-resolver.ts). */
  resolver?: Resolver;
  /** HOOKRAIL_EGRESS_SOURCE_ADDRESS: bind outbound sockets to this local address. */
  localAddress?: string | null;
  /** Sent as `user-agent` when the caller's headers carry none. */
  userAgent?: string;
  /** Sockets per origin; default unlimited (the worker's per-endpoint caps govern concurrency). */
  maxConnectionsPerOrigin?: number | null;
  /** Deployment-wide extra trusted CAs, added to Node's roots (never a per-endpoint "insecure" switch). */
  ca?: string | Buffer | ReadonlyArray<string | Buffer>;
  connectTimeoutMs?: number;
  /** The whole attempt across all hops; default 15 s. Tests shorten it. */
  attemptTimeoutMs?: number;
  /** Clock for timings (ms epoch); default Date.now. */
  now?: () => number;
  /** Operator log hook for refused destinations (carries the address; never shown to tenants). */
  onRefusal?: RefusalListener;
}

type HopOutcome =
  | {
      kind: 'response';
      status: number;
      headers: Record<string, string>;
      /** Location header values (more than one makes a redirect invalid). */
      locations: string[];
      body: Buffer;
      wireAt: number | null;
      responseAt: number;
    }
  | { kind: 'error'; error: unknown; wireAt: number | null };

/**
 * The attempt's deadline, shared by its hops: the timer sets `reason` and cancels the hop in flight. A plain object
 * rather than an AbortController: one per attempt, and the controller, its signal and their listeners were ~4 % of
 * the delivery thread in bulk (bench:delivery, SQLite).
 */
interface Deadline {
  reason: Error | null;
  /** The hop in flight, cancelled when the deadline passes. */
  hop: CaptureHandler | null;
}

/**
 * The timer's callback, and the other callbacks of an attempt below, are module functions and methods rather than
 * closures made per attempt: TypeScript runs through tsx, whose `keepNames` wraps every named closure in a
 * `defineProperty` call, and those were ~2 % of the delivery thread in bulk (bench:delivery, SQLite).
 */
function expire(deadline: Deadline, timeoutMs: number): void {
  deadline.reason = new AttemptTimeoutError(timeoutMs);
  deadline.hop?.cancel(deadline.reason);
}

/** A redirect's body is of no use; the hop stops at its head instead of letting it stall the attempt. */
const stopsAtHead = (status: number, locations: string[]): boolean =>
  FOLLOWED_REDIRECTS.has(status) && locations.length > 0;

/** Distinct first-hop URLs whose check is memoised (the endpoints'); the memo starts over past this. */
const FIRST_HOPS_MAX = 10_000;

/**
 * What a hop needs of its URL, read once: every read of a URL getter builds a new string, and a first hop's
 * target is memoised per endpoint URL and shared by all its attempts (so nothing may change it).
 */
interface HopTarget {
  readonly url: URL;
  readonly href: string;
  readonly origin: string;
  readonly host: string;
  readonly path: string;
}

const hopTarget = (url: URL): HopTarget => ({
  url,
  href: url.href,
  origin: url.origin,
  host: url.host,
  path: `${url.pathname}${url.search}`,
});

type FirstHop = { ok: true; target: HopTarget } | { ok: false; message: string };

export class UndiciSender implements HttpSender {
  readonly #firstHops = new Map<string, FirstHop>();
  readonly #agent: Dispatcher;
  readonly #httpsOnly: boolean;
  readonly #userAgent: string | undefined;
  readonly #attemptTimeoutMs: number;
  readonly #now: () => number;

  constructor(opts: UndiciSenderOptions = {}) {
    this.#httpsOnly = opts.httpsOnly ?? false;
    this.#userAgent = opts.userAgent;
    this.#attemptTimeoutMs = opts.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.#now = opts.now ?? Date.now;
    this.#agent = createGuardedAgent({
      networks: networkPolicy(opts.allowNetworks, opts.denyNetworks),
      resolver: opts.resolver ?? systemResolver(),
      connectTimeoutMs: opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
      // Backstops only: the attempt deadline is the limit that matters.
      headersTimeoutMs: this.#attemptTimeoutMs,
      bodyTimeoutMs: this.#attemptTimeoutMs,
      localAddress: opts.localAddress ?? null,
      ...(opts.ca ? { ca: opts.ca } : {}),
      maxConnectionsPerOrigin: opts.maxConnectionsPerOrigin ?? null,
      ...(opts.onRefusal ? { onRefusal: opts.onRefusal } : {}),
    });
  }

  async send(req: OutboundRequest): Promise<SendResult> {
    const startedAt = this.#now();
    const hops: HopRecord[] = [];
    const timings: SendTimings = { startedAt, wireAt: null, responseAt: null, finishedAt: startedAt };

    const first = this.#firstHop(req.url);
    if (!first.ok) return this.#failed(timings, hops, 'destination_blocked', first.message);

    const deadline: Deadline = { reason: null, hop: null };
    const timer = setTimeout(expire, this.#attemptTimeoutMs, deadline, this.#attemptTimeoutMs);
    try {
      let target = first.target;
      const origin = target.origin;
      let sameOrigin = true;
      for (let redirects = 0; ; redirects++) {
        sameOrigin &&= target.origin === origin;
        const given = req.headersFor({ url: target.href, sameOrigin });
        const headers = this.#headers(given, target.host, req.body);
        const hop: HopRecord = { url: target.href, requestHeaders: headers, status: null };
        hops.push(hop);
        const out = await this.#exchange(target, headers, req.body, deadline);
        timings.wireAt = out.wireAt;
        if (out.kind === 'error') {
          const { errorClass, message } = classifyTransportError(out.error);
          // A hop after a redirect that the guard refuses is the endpoint's redirect, not its URL (outcome.ts).
          if (errorClass === 'destination_blocked' && redirects > 0) {
            return this.#failed(timings, hops, 'redirect_rejected', `redirect rejected: ${message}`);
          }
          return this.#failed(timings, hops, errorClass, message);
        }
        hop.status = out.status;
        timings.responseAt = out.responseAt;
        if (!(FOLLOWED_REDIRECTS.has(out.status) && out.locations.length > 0)) {
          timings.finishedAt = this.#now();
          // A copy, so the 64 KiB read buffer is not kept alive by the stored prefix.
          const bodyPrefix = Buffer.from(out.body.subarray(0, RESPONSE_STORED_BYTES));
          return { kind: 'response', status: out.status, headers: out.headers, bodyPrefix, hops, timings };
        }
        timings.responseAt = null;
        if (redirects === MAX_REDIRECTS) {
          const message = `redirect rejected: more than ${MAX_REDIRECTS} redirects`;
          return this.#failed(timings, hops, 'redirect_rejected', message);
        }
        const next = this.#redirectTarget(target.url, out.locations);
        if (!next.ok) {
          return this.#failed(timings, hops, 'redirect_rejected', `redirect rejected: ${next.message}`);
        }
        target = hopTarget(next.url);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  #failed(timings: SendTimings, hops: HopRecord[], errorClass: ErrorClass, message: string): SendResult {
    timings.finishedAt = this.#now();
    return { kind: 'error', errorClass, message, hops, timings };
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }

  /** checkUrlShape of a first hop and its target, memoised: every attempt to an endpoint has the same URL. */
  #firstHop(raw: string): FirstHop {
    let hop = this.#firstHops.get(raw);
    if (!hop) {
      if (this.#firstHops.size >= FIRST_HOPS_MAX) this.#firstHops.clear();
      const shape: UrlShape = checkUrlShape(raw, { httpsOnly: this.#httpsOnly });
      hop = shape.ok ? { ok: true, target: hopTarget(new URL(shape.url)) } : shape;
      this.#firstHops.set(raw, hop);
    }
    return hop;
  }

  /** The caller's headers for this hop, with the transport's own: lower-cased, so the record is what went out. */
  #headers(given: Record<string, string>, host: string, body: Buffer): Record<string, string> {
    const out: Record<string, string> = { host };
    // for…in rather than Object.entries: no pair arrays per header on every attempt.
    for (const name in given) {
      const key = name.toLowerCase();
      if (!TRANSPORT_HEADERS.has(key)) out[key] = given[name] as string;
    }
    if (out['user-agent'] === undefined && this.#userAgent) out['user-agent'] = this.#userAgent;
    out['accept-encoding'] = 'identity';
    out['content-length'] = String(body.length);
    return out;
  }

  #redirectTarget(
    current: URL,
    locations: string[],
  ): { ok: true; url: URL } | { ok: false; message: string } {
    if (locations.length !== 1) return { ok: false, message: 'more than one Location header' };
    const location = locations[0]!;
    if (location.length > MAX_URL_LENGTH) return { ok: false, message: 'Location is too long' };
    let resolved: URL;
    try {
      resolved = new URL(location, current);
    } catch {
      return { ok: false, message: 'Location is not a valid URL' };
    }
    // Run the URL policy on what the server typed where possible, so that `http://0x7f.1/` is caught as typed.
    const typed = /^[a-z][a-z0-9+.-]*:/i.test(location)
      ? location
      : location.startsWith('//')
        ? `${current.protocol}${location}`
        : resolved.href;
    const shape = checkUrlShape(typed, { httpsOnly: this.#httpsOnly });
    if (!shape.ok) return { ok: false, message: shape.message };
    if (current.protocol === 'https:' && shape.protocol !== 'https:') {
      return { ok: false, message: 'redirect from https to http is not allowed' };
    }
    return { ok: true, url: new URL(shape.url) };
  }

  /** One request/response on the guarded agent, bounded by the attempt deadline and the read cap. */
  #exchange(
    target: HopTarget,
    headers: Record<string, string>,
    body: Buffer,
    deadline: Deadline,
  ): Promise<HopOutcome> {
    return new Promise<HopOutcome>((resolve) => {
      const handler = new CaptureHandler(this.#now, deadline, resolve);
      if (deadline.reason) {
        handler.cancel(deadline.reason);
        return;
      }
      deadline.hop = handler;
      this.#agent.dispatch(
        { origin: target.origin, path: target.path, method: 'POST', headers, body },
        handler,
      );
    });
  }
}

/** Marks an abort that we started because we had read enough; it is not an error. */
class CaptureComplete extends Error {}

/**
 * A dispatch handler that records timings and keeps at most RESPONSE_READ_LIMIT_BYTES of body. It settles exactly
 * once: at the end of the body, at the cap, at a redirect's head, on error, or when cancelled by the deadline.
 */
class CaptureHandler implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | null = null;
  #settled = false;
  #wireAt: number | null = null;
  #head: { status: number; headers: Record<string, string>; locations: string[]; at: number } | null = null;
  #chunks: Buffer[] = [];
  #received = 0;

  /** Settling clears the deadline's hop and resolves the hop's promise with the outcome. */
  constructor(
    private readonly now: () => number,
    private readonly deadline: Deadline,
    private readonly resolve: (outcome: HopOutcome) => void,
  ) {}

  cancel(reason: unknown): void {
    this.#fail(reason);
    this.#controller?.abort(reason instanceof Error ? reason : new Error(String(reason)));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.#settled) {
      // Cancelled while waiting for a socket: abort before undici writes anything.
      controller.abort(new CaptureComplete());
      return;
    }
    this.#controller = controller;
    // undici writes a Buffer body synchronously right after this hook, so a microtask later it is in the socket
    // (handed to the kernel; "on the wire" as far as a user-space client can tell).
    queueMicrotask(() => {
      if (!controller.aborted && !this.#settled) this.#wireAt = this.now();
    });
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (this.#settled || statusCode < 200) return; // 1xx: interim, the final head follows
    const flat: Record<string, string> = {};
    for (const k in headers) {
      const v = headers[k];
      if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
    }
    const loc = headers.location;
    const locations = loc === undefined ? [] : Array.isArray(loc) ? loc : [loc];
    this.#head = { status: statusCode, headers: flat, locations, at: this.now() };
    if (stopsAtHead(statusCode, locations)) this.#stop(controller);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
    const room = RESPONSE_READ_LIMIT_BYTES - this.#received;
    this.#chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
    this.#received += Math.min(room, chunk.length);
    // Enough: drop the connection rather than drain a body that may never end.
    if (this.#received >= RESPONSE_READ_LIMIT_BYTES) this.#stop(controller);
  }

  onResponseEnd(): void {
    if (this.#head) this.#finish();
    else this.#fail(new Error('response ended without a status line'));
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (!(err instanceof CaptureComplete)) this.#fail(err);
  }

  #stop(controller: Dispatcher.DispatchController): void {
    this.#finish();
    controller.abort(new CaptureComplete());
  }

  /** After the final head, any failure still yields the response read so far (the status decides). */
  #fail(error: unknown): void {
    if (this.#head) {
      this.#finish();
      return;
    }
    if (this.#settled) return;
    this.#settle({ kind: 'error', error, wireAt: this.#wireAt });
  }

  #finish(): void {
    if (this.#settled || !this.#head) return;
    const { status, headers, locations, at } = this.#head;
    const body = Buffer.concat(this.#chunks, this.#received);
    this.#settle({
      kind: 'response',
      status,
      headers,
      locations,
      body,
      wireAt: this.#wireAt,
      responseAt: at,
    });
  }

  #settle(outcome: HopOutcome): void {
    this.#settled = true;
    if (this.deadline.hop === this) this.deadline.hop = null;
    this.resolve(outcome);
  }
}
