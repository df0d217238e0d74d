/**
 * Outcome classification (PRODUCT.md §5, ADR-08): what one attempt's result means for the delivery.
 * 2xx delivered; 408, 429 and 5xx retryable; every other status — including a 3xx left over after redirect
 * handling, and 410 — is permanent: dead-lettered at once, never retried, never silent.
 *
 * An oversized response body is deliberately NOT a failure class: the delivery client reads at most 64 KiB and
 * then stops, so a 2xx with a large body is still delivered. Only the status line decides.
 */

/** The cap on a `Retry-After` the endpoint asks for; it replaces the computed backoff (see retry-schedule.ts). */
export const RETRY_AFTER_CAP_MS = 60 * 60 * 1000;
/** Only these statuses carry a meaningful `Retry-After` for a webhook sender. */
export const RETRY_AFTER_STATUSES: readonly number[] = [429, 503];
export const RETRYABLE_STATUSES_4XX: readonly number[] = [408, 429];

/**
 * Transport-level failures, named by the delivery adapter, and the two failures that are Hookrail's own
 * (`circuit_open`, `platform_error`). Each value is persisted in the attempt log, so values may be added but never
 * renamed.
 */
export const ERROR_CLASSES = {
  connect_refused: 'retryable',
  connect_timeout: 'retryable',
  dns: 'retryable',
  tls: 'retryable',
  reset: 'retryable',
  timeout: 'retryable',
  network: 'retryable',
  // Not sent at all while the endpoint's circuit is open; recorded so the schedule keeps running (§5).
  circuit_open: 'retryable',
  // Hookrail itself could not make the attempt: a signing secret it cannot open (sealed under another master key),
  // no active secret, or an internal error while preparing or sending. Retried on the schedule like any retryable
  // failure, so the delivery still ends delivered or dead-lettered (§6) and uses its 12 attempts / 72 h; whether a
  // request reached the endpoint is unknown (a send that threw may have got out), so a retry may be a duplicate.
  platform_error: 'retryable',
  // The address guard refused the resolved address (ADR-11). Retrying would only repeat a request-forgery
  // probe against a forbidden network; the tenant has to fix the URL (or the operator HOOKRAIL_ALLOW_NETWORKS).
  destination_blocked: 'permanent',
  // More than 3 redirects, an https→http downgrade, or a redirect to a blocked address. Like a bare 3xx, this
  // is the endpoint's configuration and will answer the same way next time (ADR-12).
  redirect_rejected: 'permanent',
} as const satisfies Record<string, 'retryable' | 'permanent'>;

export type ErrorClass = keyof typeof ERROR_CLASSES;
/** `http_status` marks a failure decided by the response status; the status itself is stored with the attempt. */
export type FailureClass = ErrorClass | 'http_status';

export type AttemptResult =
  | { kind: 'response'; status: number; retryAfterHeader?: string | null; nowMs: number }
  | { kind: 'error'; errorClass: ErrorClass };

export type Outcome =
  | { result: 'delivered' }
  | { result: 'retryable'; errorClass: FailureClass; retryAfterMs?: number }
  | { result: 'permanent'; errorClass: FailureClass };

/**
 * Failures that are not the endpoint's doing, recorded so that the delivery's schedule keeps running: `circuit_open`
 * (Hookrail chose not to send) and `platform_error` (Hookrail could not). They judge nothing of the endpoint — its
 * circuit, failure streak, health and auto-disable (judgesEndpoint) — but use the delivery's retry budget like any
 * failure (retry-schedule.ts).
 */
export const NOT_THE_ENDPOINTS: readonly ErrorClass[] = ['circuit_open', 'platform_error'];

/**
 * Whether an attempt with this error class (null: delivered) is evidence about the endpoint. A plain string, as read
 * back from the attempt log: unknown classes judge, as every class did before it was added here.
 */
export function judgesEndpoint(errorClass: string | null): boolean {
  return errorClass === null || !(NOT_THE_ENDPOINTS as readonly string[]).includes(errorClass);
}

export function isErrorClass(value: string): value is ErrorClass {
  return Object.hasOwn(ERROR_CLASSES, value);
}

export function isRetryableStatus(status: number): boolean {
  return RETRYABLE_STATUSES_4XX.includes(status) || (status >= 500 && status <= 599);
}

export function classifyOutcome(input: AttemptResult): Outcome {
  if (input.kind === 'error') {
    const errorClass = input.errorClass;
    return ERROR_CLASSES[errorClass] === 'retryable'
      ? { result: 'retryable', errorClass }
      : { result: 'permanent', errorClass };
  }
  const { status } = input;
  if (status >= 200 && status <= 299) return { result: 'delivered' };
  if (!isRetryableStatus(status)) return { result: 'permanent', errorClass: 'http_status' };
  if (RETRY_AFTER_STATUSES.includes(status) && input.retryAfterHeader != null) {
    const retryAfterMs = parseRetryAfter(input.retryAfterHeader, input.nowMs);
    if (retryAfterMs !== undefined) return { result: 'retryable', errorClass: 'http_status', retryAfterMs };
  }
  return { result: 'retryable', errorClass: 'http_status' };
}

/**
 * `Retry-After` (RFC 9110 §10.2.3) as a delay in ms from `nowMs`, capped at RETRY_AFTER_CAP_MS; a date in the
 * past means "now" (0). Anything unparseable (negative, fractional, ISO 8601, a non-GMT zone) returns undefined
 * and the computed backoff applies, so a broken header can neither stall a delivery nor skip its backoff.
 */
export function parseRetryAfter(header: string, nowMs: number): number | undefined {
  const value = header.trim();
  if (/^\d+$/.test(value)) {
    // Digits only (leading zeros are legal: 1*DIGIT). Past ten significant digits a value saturates rather than
    // overflowing into Infinity/NaN arithmetic.
    const significant = value.replace(/^0+(?=\d)/, '');
    const seconds = significant.length > 10 ? Number.POSITIVE_INFINITY : Number(significant);
    return Math.min(seconds * 1000, RETRY_AFTER_CAP_MS);
  }
  const at = parseHttpDate(value);
  if (at === undefined) return undefined;
  return Math.min(Math.max(0, at - nowMs), RETRY_AFTER_CAP_MS);
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const IMF_FIXDATE = /^[A-Za-z]{3}, (\d{2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC850_DATE = /^[A-Za-z]+, (\d{2})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME_DATE = /^[A-Za-z]{3} ([A-Za-z]{3}) ( \d|\d{2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/**
 * The three HTTP-date forms a recipient must accept, parsed by hand into UTC: `Date.parse` reads asctime
 * (which has no zone) as local time and accepts many non-HTTP forms. The weekday name is not cross-checked.
 */
export function parseHttpDate(value: string): number | undefined {
  const fields = httpDateFields(value);
  if (!fields) return undefined;
  const { year, monthName, day, hour, minute, second } = fields;
  const month = MONTHS.indexOf(monthName.toLowerCase());
  if (month < 0 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  // A leap second (60) is clamped; Date.UTC would otherwise roll it into the next minute.
  return Date.UTC(year, month, day, hour, minute, Math.min(second, 59));
}

// Checked by hand because Date.UTC silently rolls 31 Feb over into March.
function daysInMonth(year: number, month: number): number {
  if (month !== 1) return [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month]!;
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
}

interface HttpDateFields {
  year: number;
  monthName: string;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function httpDateFields(value: string): HttpDateFields | undefined {
  const time = (h: string, mi: string, s: string) => ({
    hour: Number(h),
    minute: Number(mi),
    second: Number(s),
  });
  const imf = IMF_FIXDATE.exec(value);
  if (imf) {
    const [, d, mon, y, h, mi, s] = imf;
    return { year: Number(y), monthName: mon!, day: Number(d), ...time(h!, mi!, s!) };
  }
  const rfc850 = RFC850_DATE.exec(value);
  if (rfc850) {
    const [, d, mon, yy, h, mi, s] = rfc850;
    // Two-digit years: RFC 9110 reads a year more than 50 years ahead as the past. A webhook sender only
    // meets recent dates, so 00-69 → 20xx and 70-99 → 19xx is equivalent here.
    const year = Number(yy) < 70 ? 2000 + Number(yy) : 1900 + Number(yy);
    return { year, monthName: mon!, day: Number(d), ...time(h!, mi!, s!) };
  }
  const asctime = ASCTIME_DATE.exec(value);
  if (asctime) {
    const [, mon, d, h, mi, s, y] = asctime;
    return { year: Number(y), monthName: mon!, day: Number(d!.trim()), ...time(h!, mi!, s!) };
  }
  return undefined;
}
