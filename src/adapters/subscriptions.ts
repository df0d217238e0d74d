/** What fan-out reads of an endpoint to match events against it (both stores). */

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
