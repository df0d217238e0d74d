/**
 * "Does this tenant exist?" on the intake hot path. Positive answers are cached briefly per process (misses never
 * are). A tenant deleted within the cache window may still have an event accepted here; fan-out re-reads the
 * tenant strongly consistently and sends nothing for a deleted tenant (ADR-16), so nothing is delivered.
 */
import type { Store } from '../ports/store.ts';

export class TenantDirectory {
  private readonly live = new Map<string, number>();

  constructor(private readonly deps: { store: Store; now: () => number; cacheMs: number }) {}

  async exists(tenantId: string): Promise<boolean> {
    const now = this.deps.now();
    const until = this.live.get(tenantId);
    if (until !== undefined && until > now) return true;
    const tenant = await this.deps.store.tenantGet({ id: tenantId });
    if (!tenant) {
      this.live.delete(tenantId);
      return false;
    }
    if (this.deps.cacheMs > 0) {
      if (this.live.size > 100_000) this.live.clear();
      this.live.set(tenantId, now + this.deps.cacheMs);
    }
    return true;
  }

  forget(tenantId: string): void {
    this.live.delete(tenantId);
  }
}
