/**
 * Transport failures → the persisted ErrorClass (src/domain/outcome.ts) and a message safe to show the tenant.
 * Messages never carry addresses or the underlying error text (which can name resolved or internal hosts); the
 * error code, where there is one, is kept because it helps the tenant debug their own server.
 */
import type { ErrorClass } from '../../domain/outcome.ts';
import { DESTINATION_NOT_ALLOWED, DestinationBlockedError, DnsResolutionError } from './guarded-agent.ts';

/** The sender's own overall deadline fired (PRODUCT.md §5: whole attempt 15 s, across every redirect hop). */
export class AttemptTimeoutError extends Error {
  readonly code = 'HOOKRAIL_ATTEMPT_TIMEOUT';
  constructor(readonly timeoutMs: number) {
    super(`timed out after ${timeoutMs / 1000} s`);
    this.name = 'AttemptTimeoutError';
  }
}

export interface ClassifiedError {
  errorClass: ErrorClass;
  message: string;
}

const DNS_CODES = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NODATA',
  'EAI_NONAME',
  'ENODATA',
  'ESERVFAIL',
]);
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET']);
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|EPROTO$)|CERT|SELF_SIGNED|UNABLE_TO_|HOSTNAME_MISMATCH/;

/** Every `code` in the error, its cause chain and (for happy-eyeballs failures) its AggregateError members. */
function codesOf(err: unknown, depth = 0): string[] {
  if (!err || typeof err !== 'object' || depth > 4) return [];
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown };
  const own = typeof e.code === 'string' ? [e.code] : [];
  const members = Array.isArray(e.errors) ? e.errors.flatMap((m) => codesOf(m, depth + 1)) : [];
  return [...own, ...codesOf(e.cause, depth + 1), ...members];
}

export function classifyTransportError(err: unknown): ClassifiedError {
  if (err instanceof DestinationBlockedError) {
    return { errorClass: 'destination_blocked', message: DESTINATION_NOT_ALLOWED };
  }
  if (err instanceof AttemptTimeoutError) return { errorClass: 'timeout', message: err.message };
  if (err instanceof DnsResolutionError) return { errorClass: 'dns', message: err.message };
  const codes = codesOf(err);
  const has = (...c: string[]) => codes.some((x) => c.includes(x));
  if (has('UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT')) {
    return { errorClass: 'connect_timeout', message: 'connection timed out' };
  }
  if (has('ECONNREFUSED')) return { errorClass: 'connect_refused', message: 'connection refused' };
  if (codes.some((c) => DNS_CODES.has(c)))
    return { errorClass: 'dns', message: 'host name could not be resolved' };
  const tls = codes.find((c) => TLS_CODE.test(c));
  if (tls) return { errorClass: 'tls', message: `TLS handshake failed (${tls})` };
  if (codes.some((c) => RESET_CODES.has(c))) return { errorClass: 'reset', message: 'connection reset' };
  if (has('UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'))
    return { errorClass: 'timeout', message: 'timed out' };
  if (has('UND_ERR_HEADERS_OVERFLOW'))
    return { errorClass: 'network', message: 'response headers too large' };
  if (has('UND_ERR_INVALID_ARG')) return { errorClass: 'network', message: 'invalid request header' };
  const code = codes.find((c) => /^[A-Z][A-Z0-9_]+$/.test(c));
  return { errorClass: 'network', message: code ? `network error (${code})` : 'network error' };
}
