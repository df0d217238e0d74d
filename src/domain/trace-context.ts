/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` a producer may send with an event,
 * kept with the event so that each delivery attempt's span joins the producer's trace. A header that does not
 * parse is ignored, as the specification asks of a receiver — never a reason to refuse the event.
 */

const HEX = /^[0-9a-f]+$/;
const ZERO = /^0+$/;

/**
 * The header in its version-00 form (`00-<trace-id>-<parent-id>-<flags>`), or null when absent or invalid. A later
 * version is read by its version-00 prefix, as the specification allows; version `ff` is invalid.
 */
export function parseTraceparent(header: string | undefined | null): string | null {
  if (!header || header.length < 55 || header.length > 512) return null;
  const v = header.trim();
  const version = v.slice(0, 2);
  if (!HEX.test(version) || version === 'ff') return null;
  if (version === '00' ? v.length !== 55 : v.length > 55 && v[55] !== '-') return null;
  if (v[2] !== '-' || v[35] !== '-' || v[52] !== '-') return null;
  const traceId = v.slice(3, 35);
  const parentId = v.slice(36, 52);
  const flags = v.slice(53, 55);
  if (!HEX.test(traceId) || ZERO.test(traceId)) return null;
  if (!HEX.test(parentId) || ZERO.test(parentId)) return null;
  if (!HEX.test(flags)) return null;
  return `00-${traceId}-${parentId}-${flags}`;
}

export interface TraceParent {
  traceId: string;
  spanId: string;
  /** The flags byte; bit 0: the producer sampled its trace. */
  flags: number;
}

/** The parts of a header that parseTraceparent returned. */
export function traceParentParts(normalised: string): TraceParent {
  return {
    traceId: normalised.slice(3, 35),
    spanId: normalised.slice(36, 52),
    flags: Number.parseInt(normalised.slice(53, 55), 16),
  };
}
