/**
 * Decrypted signing secrets per endpoint, cached briefly so an attempt costs no database read or decryption in the
 * common case. The TTL bounds how long a rotation or early retirement takes to reach a running worker; during a
 * rotation overlap both secrets are valid, so a consumer that switches to the new secret later than that (as
 * docs/consumer-contract.md asks) never sees a request it rejects.
 */
import type { Clock } from '../ports/clock.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { Store } from '../ports/store.ts';

export const secretAad = (tenantId: string, endpointId: string) =>
  `tenant:${tenantId}/endpoint:${endpointId}`;

export class SecretCache {
  private readonly entries = new Map<string, { secrets: string[]; until: number }>();
  /** Reads in progress: the attempts that miss together (an endpoint's in-flight ones, at expiry) share one. */
  private readonly loading = new Map<string, Promise<string[]>>();

  constructor(private readonly deps: { store: Store; keys: KeyService; clock: Clock; ttlMs: number }) {}

  /** Active secrets, newest first. */
  async get(tenantId: string, endpointId: string): Promise<string[]> {
    const now = this.deps.clock.now();
    const hit = this.entries.get(endpointId);
    if (hit && hit.until > now) return hit.secrets;
    let load = this.loading.get(endpointId);
    if (!load) {
      load = this.load(tenantId, endpointId, now).finally(() => this.loading.delete(endpointId));
      this.loading.set(endpointId, load);
    }
    return load;
  }

  private async load(tenantId: string, endpointId: string, now: number): Promise<string[]> {
    const records = await this.deps.store.secretListActive({ endpointId, now });
    const aad = secretAad(tenantId, endpointId);
    const secrets = records.map((r) => this.deps.keys.open(r.sealed, aad).toString('utf8'));
    if (this.deps.ttlMs > 0) {
      if (this.entries.size > 50_000) this.entries.clear();
      // Never cache past the moment the oldest of them stops being active.
      const expiries = records.map((r) => r.activeUntil ?? Number.POSITIVE_INFINITY);
      this.entries.set(endpointId, { secrets, until: Math.min(now + this.deps.ttlMs, ...expiries) });
    }
    return secrets;
  }
}
