/**
 * The error catalogue: every error the API can answer, with a stable snake_case code and its HTTP status.
 * Clients branch on `code`; messages may be reworded. Add codes here, never inline in handlers.
 */
export const ERRORS = {
  validation_failed: { status: 400, message: 'The request is not valid.' },
  invalid_json: { status: 400, message: 'The request body is not valid JSON.' },
  invalid_cursor: { status: 400, message: 'The cursor is not valid.' },
  invalid_url: { status: 400, message: 'The endpoint URL is not valid.' },
  header_not_allowed: { status: 400, message: 'This custom header may not be set on deliveries.' },
  unauthorized: { status: 401, message: 'A valid API key is required (Authorization: Bearer <key>).' },
  forbidden: { status: 403, message: 'This key may not perform this action.' },
  step_up_required: { status: 403, message: 'This action needs a fresh step-up token (X-Step-Up-Token).' },
  invalid_totp: { status: 403, message: 'The TOTP code is wrong, expired or already used.' },
  not_found: { status: 404, message: 'No such resource.' },
  route_not_found: { status: 404, message: 'No such route.' },
  tenant_not_found: { status: 404, message: 'No such tenant.' },
  conflict: { status: 409, message: 'The request conflicts with the current state.' },
  idempotency_key_reused: {
    status: 409,
    message: 'This Idempotency-Key was already used for a different request.',
  },
  last_active_secret: {
    status: 409,
    message: 'This is the only active signing secret; rotate first, then retire the old one.',
  },
  confirmation_required: {
    status: 409,
    message: 'This action affects many deliveries; resend with confirm.',
  },
  not_replayable: {
    status: 409,
    message: 'This delivery may not be replayed: an acknowledged unsubscribe binds.',
  },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  unsupported_media_type: { status: 415, message: 'Content-Type must be application/json.' },
  destination_not_allowed: { status: 422, message: 'Hookrail does not deliver to this destination.' },
  rate_limited: { status: 429, message: 'Too many requests.' },
  internal_error: { status: 500, message: 'Internal error.' },
  store_unavailable: { status: 503, message: 'The store is unavailable; retry shortly.' },
  shutting_down: { status: 503, message: 'This process is shutting down; retry on another.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly details?: Record<string, unknown>,
    readonly retryAfterSeconds?: number,
  ) {
    super(message ?? ERRORS[code].message);
    this.status = ERRORS[code].status;
  }
}
