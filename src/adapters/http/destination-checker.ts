/**
 * Registration-time destination check (docs/security.md: URL policy and resolution check): the URL policy, then the
 * same resolve-and-check-every-address step the connect guard runs. It exists for the tenant's benefit — a clear
 * error when the endpoint is created — and decides nothing at delivery time: DNS answers change, so every
 * connection is checked again by the guarded agent (undici-sender.ts).
 */
import {
  checkAddress,
  checkUrlShape,
  type NetworkPolicy,
  networkPolicy,
} from '../../domain/address-policy.ts';
import type { DestinationChecker } from '../../ports/http-sender.ts';
import {
  DESTINATION_NOT_ALLOWED,
  DestinationBlockedError,
  type RefusalListener,
  type Resolver,
  resolveAllowed,
} from './guarded-agent.ts';
import { systemResolver } from './system-resolver.ts';

export interface GuardedDestinationCheckerOptions {
  allowNetworks?: readonly string[];
  /** HOOKRAIL_DENY_NETWORKS: public ranges refused all the same (the operator's own addresses). */
  denyNetworks?: readonly string[];
  httpsOnly?: boolean;
  resolver?: Resolver;
  /** Upper bound on name resolution, so an API request never hangs on a slow DNS server. Default 5 s. */
  resolveTimeoutMs?: number;
  onRefusal?: RefusalListener;
}

export class GuardedDestinationChecker implements DestinationChecker {
  /**
   * The URL policy `check` applies (HOOKRAIL_HTTPS_ONLY), for the caller to check a URL's shape under it first and
   * tell a URL-shape refusal (400) from a destination refusal (app/manage-endpoints.ts, EndpointDeps.destinations).
   */
  readonly httpsOnly: boolean;
  readonly #networks: NetworkPolicy;
  readonly #resolver: Resolver;
  readonly #timeoutMs: number;
  readonly #onRefusal: RefusalListener | undefined;

  constructor(opts: GuardedDestinationCheckerOptions = {}) {
    this.#networks = networkPolicy(opts.allowNetworks, opts.denyNetworks);
    this.httpsOnly = opts.httpsOnly ?? false;
    this.#resolver = opts.resolver ?? systemResolver();
    this.#timeoutMs = opts.resolveTimeoutMs ?? 5_000;
    this.#onRefusal = opts.onRefusal;
  }

  async check(url: string): Promise<{ ok: true; url: string } | { ok: false; reason: string }> {
    const shape = checkUrlShape(url, { httpsOnly: this.httpsOnly });
    if (!shape.ok) return { ok: false, reason: shape.message };
    if (shape.hostKind !== 'name') {
      const verdict = checkAddress(shape.hostname, this.#networks.allow, this.#networks.deny);
      if (!verdict.blocked) return { ok: true, url: shape.url };
      this.#onRefusal?.({ host: shape.hostname, address: shape.hostname, reason: verdict.reason });
      return { ok: false, reason: DESTINATION_NOT_ALLOWED };
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), this.#timeoutMs);
    });
    try {
      await Promise.race([
        resolveAllowed(shape.hostname, this.#resolver, this.#networks, this.#onRefusal),
        timeout,
      ]);
      return { ok: true, url: shape.url };
    } catch (err) {
      if (err instanceof DestinationBlockedError) return { ok: false, reason: DESTINATION_NOT_ALLOWED };
      return { ok: false, reason: 'host name could not be resolved' };
    } finally {
      clearTimeout(timer);
    }
  }
}
