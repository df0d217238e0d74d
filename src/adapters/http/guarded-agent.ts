/**
 * The authoritative address guard (ADR-11; docs/security.md): an undici Agent whose connect path resolves
 * the host through an injectable resolver, checks EVERY answer, and hands net/tls.connect a `lookup` that returns
 * exactly the answers it just checked. Node then dials only those addresses — there is no second resolution for
 * a rebinding DNS server to answer differently. IP-literal hosts never reach `lookup`, so they are checked here
 * before connecting. TLS still gets the host name (SNI, certificate check against the registered name).
 *
 * Pooling: undici keeps sockets per origin; a kept-alive socket is bound to an address checked when it was
 * opened, and every new socket goes through the guard again. Build a new agent when the allow-list changes.
 *
 * Limits: this sees only the addresses we dial. If deliveries ever go through an HTTP proxy, the proxy must do
 * the filtering (the guard would only see the proxy's address). Network containment (PRODUCT.md §7) is the
 * independent second layer.
 */
import { isIP, isIPv6, type LookupFunction } from 'node:net';
import { rootCertificates } from 'node:tls';
import { Agent, buildConnector } from 'undici';
import { checkAddress, type NetworkPolicy } from '../../domain/address-policy.ts';

export interface Resolver {
  /** Every address the name resolves to (A and AAAA). An empty list or a rejection means "does not resolve". */
  resolve(host: string): Promise<string[]>;
}

export const DESTINATION_NOT_ALLOWED = 'destination not allowed';

/** The guard refused an address. The message is safe for tenants; `address` and `reason` are for operators only. */
export class DestinationBlockedError extends Error {
  readonly code = 'HOOKRAIL_DESTINATION_BLOCKED';
  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: string,
  ) {
    super(DESTINATION_NOT_ALLOWED);
    this.name = 'DestinationBlockedError';
  }
}

/** The resolver failed or found nothing; the original error (ENOTFOUND, EAI_AGAIN …) is the cause. */
export class DnsResolutionError extends Error {
  readonly code = 'HOOKRAIL_DNS';
  constructor(
    readonly host: string,
    cause?: unknown,
  ) {
    super('host name could not be resolved', { cause });
    this.name = 'DnsResolutionError';
  }
}

/** What the operator log gets when the guard refuses a destination (never shown to tenants). */
export interface GuardRefusal {
  host: string;
  address: string;
  reason: string;
}

export type RefusalListener = (refusal: GuardRefusal) => void;

/**
 * Resolves `host` and returns its addresses only if every one of them is allowed: a name with one public and one
 * private answer is refused as a whole, because happy-eyeballs would fall through to whichever address answers.
 */
export async function resolveAllowed(
  host: string,
  resolver: Resolver,
  networks: NetworkPolicy,
  onRefusal?: RefusalListener,
): Promise<string[]> {
  let addresses: string[];
  try {
    addresses = await resolver.resolve(host);
  } catch (err) {
    throw new DnsResolutionError(host, err);
  }
  if (addresses.length === 0) throw new DnsResolutionError(host);
  for (const address of addresses) refuseIfBlocked(host, address, networks, onRefusal);
  return addresses;
}

function refuseIfBlocked(
  host: string,
  address: string,
  networks: NetworkPolicy,
  onRefusal?: RefusalListener,
) {
  const verdict = checkAddress(address, networks.allow, networks.deny);
  if (!verdict.blocked) return;
  onRefusal?.({ host, address, reason: verdict.reason });
  throw new DestinationBlockedError(host, address, verdict.reason);
}

export interface GuardedAgentOptions {
  networks: NetworkPolicy;
  resolver: Resolver;
  connectTimeoutMs: number;
  /** Whole-response limits; the sender's overall deadline is shorter, these are backstops. */
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  /** Bind outbound sockets to this local address (HOOKRAIL_EGRESS_SOURCE_ADDRESS); its family must match. */
  localAddress?: string | null;
  /** Extra trusted CAs for the whole deployment (private CAs of self-hosters), added to Node's roots. */
  ca?: string | Buffer | ReadonlyArray<string | Buffer>;
  /**
   * Sockets per origin. Null (the default) leaves concurrency to the delivery worker's per-endpoint caps: many
   * endpoints can share one origin (a SaaS receiver), and a per-origin queue would let one slow endpoint
   * delay the others.
   */
  maxConnectionsPerOrigin?: number | null;
  onRefusal?: RefusalListener;
}

/** Header-flood backstop: a response head larger than this is a `network` failure (UND_ERR_HEADERS_OVERFLOW). */
export const MAX_RESPONSE_HEADER_BYTES = 16 * 1024;

export function createGuardedAgent(opts: GuardedAgentOptions): Agent {
  const { networks, resolver, onRefusal } = opts;

  const lookup: LookupFunction = (hostname, options, callback) => {
    resolveAllowed(hostname, resolver, networks, onRefusal).then(
      (addresses) => {
        const list = addresses.map((address) => ({ address, family: isIPv6(address) ? 6 : 4 }));
        // Node asks for all answers when happy-eyeballs (autoSelectFamily, on by default in Node 20) is active.
        if (options.all) callback(null, list);
        else callback(null, list[0]!.address, list[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };

  const connector = buildConnector({
    lookup,
    timeout: opts.connectTimeoutMs,
    minVersion: 'TLSv1.2',
    ...(opts.ca ? { ca: [...rootCertificates, ...[opts.ca].flat()] } : {}),
  });

  return new Agent({
    connect(connectOpts, callback) {
      // undici strips IPv6 brackets from `hostname`; literals are dialled without `lookup`, so check them here.
      const host = connectOpts.hostname.replace(/^\[(.*)\]$/, '$1');
      if (isIP(host) !== 0) {
        try {
          refuseIfBlocked(host, host, networks, onRefusal);
        } catch (err) {
          callback(err as Error, null);
          return;
        }
      }
      connector(connectOpts, callback);
    },
    connections: opts.maxConnectionsPerOrigin ?? null,
    ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
    // Short keep-alive: webhook traffic to one origin is bursty, and idle sockets are memory held for tenants.
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 10_000,
    headersTimeout: opts.headersTimeoutMs,
    bodyTimeout: opts.bodyTimeoutMs,
    maxHeaderSize: MAX_RESPONSE_HEADER_BYTES,
    // The sender stops reading at 64 KiB and drops the connection; this is the backstop if it ever did not.
    maxResponseSize: 1024 * 1024,
  });
}
