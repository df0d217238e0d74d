/**
 * Which PostgreSQL / driver errors mean "the database cannot be reached right now" (→ StoreUnavailableError, the
 * API answers 503 with Retry-After) as opposed to a bug or a constraint violation that must surface as is.
 */

/** Socket-level errno codes: the server is down, restarting or unreachable. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
]);

/**
 * SQLSTATEs outside class 08 (connection exception) that also mean "try again shortly": the server is shutting
 * down or starting (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now) or out of connection slots.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * pg reports a lost socket and pool connect timeouts as plain Errors without a code, so the message is the only
 * signal; these strings are stable across pg 8.x (see pg/lib/client.js and pg-pool/index.js).
 */
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'encountered a connection error and is not queryable',
  // pg's query_timeout: no answer within the deadline (a partition, or a server that stopped responding).
  'Query read timeout',
];

/** Deadlock and serialization failure: the transaction did nothing and may simply be run again. */
export function isRetryableTransactionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

export function isUnavailableError(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || depth > 3) return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown };
  if (typeof e.code === 'string') {
    if (NETWORK_CODES.has(e.code) || UNAVAILABLE_SQLSTATES.has(e.code)) return true;
    // Class 08: connection exception (08000, 08003, 08006, 08001, 08004, ...). Errno codes never start with a digit.
    if (/^08[0-9A-Z]{3}$/.test(e.code)) return true;
  }
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGES.some((m) => (e.message as string).includes(m))) {
    return true;
  }
  // Node's happy-eyeballs connect (localhost → ::1 and 127.0.0.1) fails with an AggregateError of the attempts.
  if (Array.isArray(e.errors) && e.errors.some((inner) => isUnavailableError(inner, depth + 1))) return true;
  return e.cause !== undefined && isUnavailableError(e.cause, depth + 1);
}
