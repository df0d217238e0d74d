/** What fan-out reads of an endpoint to match events against it (both stores). */
import { matchesEventType } from '../domain/event-types.ts';

/** An endpoint as fan-out sees it: its subscriptions, and whether it is enabled (a disabled one still gets rows). */
export interface Subscription {
  id: string;
  eventTypes: readonly string[];
  enabled: boolean;
}

const PARSED_MAX = 10_000;
const parsed = new Map<string, readonly string[]>();

/**
 * The `event_types` column (JSON text), parsed once per distinct value: fan-out reads every endpoint of a tenant on
 * each pass, and endpoints share few distinct lists. The arrays are shared, so frozen. Bounded: the memo starts
 * over when it holds PARSED_MAX values.
 */
export function eventTypes(json: string): readonly string[] {
  let types = parsed.get(json);
  if (!types) {
    if (parsed.size >= PARSED_MAX) parsed.clear();
    types = Object.freeze(JSON.parse(json) as string[]);
    parsed.set(json, types);
  }
  return types;
}

/** The endpoint columns fan-out reads (`id, event_types, status`), as both stores return them. */
export const subscriptionFromRow = (r: {
  id: string;
  event_types: string;
  status: string;
}): Subscription => ({
  id: r.id,
  eventTypes: eventTypes(r.event_types),
  enabled: r.status === 'enabled',
});

const TENANTS_MAX = 1_000;
const TYPES_MAX = 1_000;

/** One tenant's subscriptions as of one version of its endpoints; the matching endpoints memoised per event type. */
export class TenantSubscriptions {
  private readonly byType = new Map<string, readonly Subscription[]>();

  constructor(
    readonly version: number,
    private readonly endpoints: readonly Subscription[],
  ) {}

  /** The endpoints subscribed to `type`, in endpoint order. */
  matching(type: string): readonly Subscription[] {
    let list = this.byType.get(type);
    if (!list) {
      if (this.byType.size >= TYPES_MAX) this.byType.clear();
      list = this.endpoints.filter((ep) => matchesEventType(ep.eventTypes, type));
      this.byType.set(type, list);
    }
    return list;
  }
}

/**
 * Each tenant's subscriptions as of a version of its endpoints (`tenants.endpoints_version`, bumped by triggers on
 * every insert, delete and change of an endpoint's subscription, status or deletion, in the same transaction). Fan-out
 * reads the version in its own transaction and reads the endpoints only when no entry of that version is cached:
 * as strongly consistent as reading them every pass, which cost a tenant of 100 endpoints 130–280 µs a pass on
 * SQLite (mostly materialising the rows). A pass keeps the entries it got, so a concurrent pass that caches another
 * version meanwhile does not change what it matches against.
 *
 * One per store instance. Bounded: it starts over past TENANTS_MAX tenants, and a tenant's type memo past
 * TYPES_MAX types.
 */
export class SubscriptionCache {
  private readonly entries = new Map<string, TenantSubscriptions>();

  /** The tenant's subscriptions as of `version`, if cached. */
  get(tenantId: string, version: number): TenantSubscriptions | undefined {
    const entry = this.entries.get(tenantId);
    return entry?.version === version ? entry : undefined;
  }

  set(tenantId: string, version: number, endpoints: readonly Subscription[]): TenantSubscriptions {
    if (this.entries.size >= TENANTS_MAX && !this.entries.has(tenantId)) this.entries.clear();
    const entry = new TenantSubscriptions(version, endpoints);
    this.entries.set(tenantId, entry);
    return entry;
  }
}
