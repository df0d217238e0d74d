/**
 * Who is calling. Three kinds of credential (PRODUCT.md §2): the operator token, producer keys (`hkp_`, may only
 * hand over events) and tenant keys (`hkt_`, self-service within one tenant). Keys are looked up by their SHA-256;
 * positive lookups are cached for `cacheMs` in this process, which bounds how long a revoked key keeps working
 * on a process that saw it recently (documented in docs/operations.md). Misses are never cached.
 */
import { hash as oneShotHash, timingSafeEqual } from 'node:crypto';
import { ApiError } from '../domain/errors.ts';
import type { Store } from '../ports/store.ts';

export type Principal =
  | { kind: 'operator' }
  | { kind: 'producer'; keyId: string }
  | { kind: 'tenant'; keyId: string; tenantId: string };

// One-shot hex digest: on the intake hot path, ~5x cheaper than createHash().update().digest() + toString('hex').
const sha256Hex = (s: string) => oneShotHash('sha256', s, 'hex');

export class Authenticator {
  private readonly operatorHash: Buffer;
  private readonly cache = new Map<string, { principal: Principal; until: number }>();
  /**
   * Bumped by every forget: a lookup that began before a forget does not cache what it read, which may be a key
   * revoked while the lookup was in flight.
   */
  private generation = 0;

  constructor(
    private readonly deps: { store: Store; now: () => number; operatorToken: string; cacheMs: number },
  ) {
    this.operatorHash = Buffer.from(sha256Hex(deps.operatorToken), 'latin1');
  }

  /** Resolves an `Authorization` header value to a principal, or throws 401. */
  async authenticate(header: string | undefined): Promise<Principal> {
    const match = header ? /^Bearer ([\x21-\x7e]{1,512})$/.exec(header) : null;
    if (!match) throw new ApiError('unauthorized');
    const token = match[1] as string;
    const hash = sha256Hex(token);
    if (timingSafeEqual(Buffer.from(hash, 'latin1'), this.operatorHash)) return { kind: 'operator' };
    if (!token.startsWith('hkp_') && !token.startsWith('hkt_')) throw new ApiError('unauthorized');
    const now = this.deps.now();
    const hit = this.cache.get(hash);
    if (hit && hit.until > now) return hit.principal;
    const generation = this.generation;
    const key = await this.deps.store.apiKeyFindByHash({ hash });
    if (!key) {
      this.cache.delete(hash);
      throw new ApiError('unauthorized');
    }
    const principal: Principal =
      key.kind === 'producer'
        ? { kind: 'producer', keyId: key.id }
        : { kind: 'tenant', keyId: key.id, tenantId: key.tenantId as string };
    if (this.deps.cacheMs > 0 && generation === this.generation) {
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(hash, { principal, until: now + this.deps.cacheMs });
    }
    return principal;
  }

  /** Forget cached principals at once (called after a revocation in this process). */
  forgetAll(): void {
    this.generation++;
    this.cache.clear();
  }

  /**
   * Forget the tenant's cached keys (called after its key was replaced in this process): a walk over at most
   * 10 000 entries, for a rare action, and the other tenants' and producers' keys stay cached. Other processes
   * keep theirs until they expire.
   */
  forgetTenant(tenantId: string): void {
    this.generation++;
    for (const [hash, hit] of this.cache) {
      if (hit.principal.kind === 'tenant' && hit.principal.tenantId === tenantId) this.cache.delete(hash);
    }
  }
}

export function requireOperator(p: Principal): void {
  if (p.kind !== 'operator') throw new ApiError('forbidden');
}

/** The tenant whose objects this principal may read: its own for a tenant key, any (null) for the operator. */
export function readScope(p: Principal): string | null {
  if (p.kind === 'operator') return null;
  if (p.kind === 'tenant') return p.tenantId;
  throw new ApiError('forbidden');
}
