/**
 * Tenant use cases for endpoints and their signing secrets (PRODUCT.md §3): register, change, delete, disable and
 * enable an endpoint; rotate, list and retire its secrets. The rules that the HTTP schema cannot express live here:
 * the URL policy, the custom-header policy and event-type filters. Every check runs before anything is written, so
 * bad input changes nothing.
 *
 * Decisions (also for the user docs):
 * - URL: `checkUrlShape` (http or https, https alone when the checker is https-only; no credentials; no
 *   whitespace/control characters/backslashes; ≤ 2048 characters as typed and once encoded; no internal host
 *   names) and the WHATWG-canonical form is what is stored; a refusal of its form is 400 `invalid_url`. When a
 *   DestinationChecker is wired in, its verdict (DNS + address guard) decides as well: 422
 *   `destination_not_allowed`, as for an internal host name. Changing the URL is an elevated action.
 * - Custom headers: names are RFC 7230 tokens, stored lower-case, unique regardless of case. Refused: hop-by-hop and
 *   framing headers (connection, keep-alive, te, trailer, transfer-encoding, upgrade, http2-settings, proxy-*), host,
 *   expect, content-length, content-type, content-encoding (they would break or misdescribe the request), user-agent
 *   and webhook-* (ours, part of the signed contract); forwarded, x-forwarded-* and x-real-ip (a receiver or its
 *   proxies may trust them as the client's address); the cloud metadata and cloud API headers (metadata,
 *   metadata-flavor, x-google-metadata-request, x-aws-ec2-metadata-token[-ttl-seconds], x-amz-*, x-goog-*,
 *   x-azure-*), which would help a destination that reaches such a service answer. `authorization` is ALLOWED:
 *   it is how a consumer behind a gateway asks for credentials, since credentials in the URL are refused. Custom
 *   headers are dropped when a redirect leaves the endpoint's origin, so they do not leak. Values are stored in
 *   clear, shown in GET and in the request inspector; they are not a place for secrets that the tenant key must
 *   not read.
 * - Secrets: `whsec_` + 32 random bytes, sealed with the KeyService bound to tenant and endpoint; shown once.
 *   Rotation keeps the previous secret active for `overlap_seconds` (default 7 days); at most two are active.
 */
import { checkUrlShape, MAX_URL_LENGTH } from '../domain/address-policy.ts';
import { ApiError } from '../domain/errors.ts';
import { EVENT_TYPE_MAX, EVENT_TYPE_PATTERN } from '../domain/event-rules.ts';
import { isValidEventTypeFilter, MAX_EVENT_TYPE_FILTERS } from '../domain/event-types.ts';
import { newId } from '../domain/ids.ts';
import { publishedRetrySchedule } from '../domain/retry-schedule.ts';
import { generateSecret } from '../domain/signature.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type {
  EndpointPatch,
  EndpointRecord,
  EndpointStatus,
  Ordering,
  SecretRecord,
} from '../ports/delivery-store.ts';
import type { DestinationChecker } from '../ports/http-sender.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { Store } from '../ports/store.ts';
import { type AuditActor, auditOf } from './audit.ts';
import type { Principal } from './auth.ts';
import { secretAad } from './secret-cache.ts';
import { requireStepUp } from './step-up.ts';

export { MAX_URL_LENGTH };
export const DEFAULT_MAX_CONCURRENCY = 10;
export const MAX_CONCURRENCY = 100;
export const MAX_CUSTOM_HEADERS = 20;
/** Names plus values of all custom headers together, in bytes (they are ASCII). */
export const MAX_CUSTOM_HEADER_BYTES = 4096;
export const MAX_HEADER_NAME_LENGTH = 256;
export const MAX_DESCRIPTION_LENGTH = 1000;
export const DEFAULT_ROTATION_OVERLAP_SECONDS = 7 * 24 * 3600;
export const MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 3600;
export const EVENT_TYPE_FILTER_MAX = EVENT_TYPE_MAX + 2;

/** RFC 7230 §3.2.6 token. */
export const HEADER_NAME_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";
/** Visible ASCII, inner spaces and tabs; no leading or trailing whitespace (parsers strip it), never CR or LF. */
export const HEADER_VALUE_PATTERN = '^[\\x21-\\x7e](?:[\\x20-\\x7e\\t]*[\\x21-\\x7e])?$';
/** `*`, an exact type, or a type followed by `.*`. */
export const EVENT_TYPE_FILTER_PATTERN = `^(?:\\*|${EVENT_TYPE_PATTERN.slice(1, -1)}(?:\\.\\*)?)$`;

const HEADER_NAME_RE = new RegExp(HEADER_NAME_PATTERN);
const HEADER_VALUE_RE = new RegExp(HEADER_VALUE_PATTERN);
/** Custom header names refused (`header_not_allowed`), and name prefixes, for one reason. */
interface RefusedHeaders {
  names: readonly string[];
  prefixes: readonly string[];
  why: string;
}
const REFUSED_HEADERS: readonly RefusedHeaders[] = [
  {
    names: [
      'connection',
      'keep-alive',
      'te',
      'trailer',
      'transfer-encoding',
      'upgrade',
      'http2-settings',
      'host',
      'expect',
      'content-length',
      'content-type',
      'content-encoding',
      // The transport asks for `identity`: the attempt log keeps the response bytes as they came.
      'accept-encoding',
      'user-agent',
    ],
    prefixes: ['proxy-', 'webhook-'],
    why: 'is set by Hookrail or controls the connection',
  },
  {
    // A receiver or its proxies may take these for the client's own address or route on them.
    names: ['forwarded', 'x-real-ip'],
    prefixes: ['x-forwarded-'],
    why: 'describes the client or proxy path, which only proxies may state',
  },
  {
    // The headers cloud metadata services and cloud APIs require before they answer: never sent on a tenant's say.
    names: [
      'metadata',
      'metadata-flavor',
      'x-google-metadata-request',
      'x-aws-ec2-metadata-token',
      'x-aws-ec2-metadata-token-ttl-seconds',
    ],
    prefixes: ['x-amz-', 'x-goog-', 'x-azure-'],
    why: 'unlocks cloud metadata services or cloud APIs',
  },
];

/** Why the (lower-case) header name may not be customised, or null when it may. */
function headerRefusal(name: string): string | null {
  const hit = REFUSED_HEADERS.find(
    (r) => r.names.includes(name) || r.prefixes.some((p) => name.startsWith(p)),
  );
  return hit ? hit.why : null;
}

const hours = (seconds: number) => `${Math.round((seconds / 3600) * 10) / 10} h`;
const SCHEDULE = publishedRetrySchedule();
const HEAD_OF_LINE =
  `until it is delivered or dead-lettered (${SCHEDULE.max_attempts} attempts: about ` +
  `${hours(SCHEDULE.expected_total_span_seconds)} on average, at most about ` +
  `${hours(SCHEDULE.worst_case_total_span_seconds)}, up to ` +
  `${hours(SCHEDULE.worst_case_total_span_with_retry_after_seconds)} if your endpoint answers Retry-After)`;

/** What the chosen ordering means for the consumer, in plain words; part of every endpoint answer. */
export const ORDERING_NOTES: Record<Ordering, string> = {
  none:
    'Deliveries may arrive in any order and several at once (up to max_concurrency). A failing delivery never ' +
    'holds up the others; order by the event timestamp if you need to.',
  endpoint:
    'Strict accept order: one delivery in flight at a time, whatever max_concurrency says. A delivery that keeps ' +
    `failing blocks every later one ${HEAD_OF_LINE}.`,
  resource:
    'Strict accept order within each resource_id: one delivery per resource in flight. A delivery that keeps ' +
    `failing blocks later events of the same resource ${HEAD_OF_LINE}; other resources keep flowing. Events ` +
    'without a resource_id are not ordered.',
};

export interface EndpointDeps {
  store: Store;
  clock: Clock;
  random: Random;
  keys: KeyService;
  /**
   * The address guard's registration-time check (absent: no destination check), with the URL policy it applies (`httpsOnly`, HOOKRAIL_HTTPS_ONLY). The
   * URL's shape is checked here first under that same policy, so a URL-shape refusal answers 400 `invalid_url` and
   * whatever the checker still refuses is the destination itself: 422 `destination_not_allowed`.
   */
  destinations?: DestinationChecker | undefined;
  /** Shared lanes new endpoints are hashed onto (HOOKRAIL_SHARED_LANES; the store's default when absent). */
  sharedLanes?: number | undefined;
}

export interface EndpointInput {
  url: string;
  description?: string | undefined;
  eventTypes: string[];
  ordering?: Ordering | undefined;
  maxConcurrency?: number | undefined;
  headers?: Record<string, string> | undefined;
}

export interface EndpointPatchInput {
  url?: string | undefined;
  description?: string | null | undefined;
  eventTypes?: string[] | undefined;
  ordering?: Ordering | undefined;
  maxConcurrency?: number | undefined;
  headers?: Record<string, string> | undefined;
}

/** Writes are the tenant's own: the operator reads everything but changes no tenant's endpoints. */
export function requireTenant(p: Principal): string {
  if (p.kind !== 'tenant')
    throw new ApiError('forbidden', 'Only the tenant key may change endpoints and secrets.');
  return p.tenantId;
}

// ---------------------------------------------------------------------------------------------------------------
// Input rules
// ---------------------------------------------------------------------------------------------------------------

/**
 * The canonical URL, or throws invalid_url (400: the URL's shape, `details.reason` says which rule) or
 * destination_not_allowed (422: an internal host name). No network.
 */
export function canonicalEndpointUrl(
  raw: string,
  opts: { httpsOnly: boolean } = { httpsOnly: false },
): string {
  const shape = checkUrlShape(raw, opts);
  if (shape.ok) return shape.url;
  if (shape.reason === 'destination_not_allowed') {
    throw new ApiError('destination_not_allowed', `URL refused: ${shape.message}.`, { reason: shape.reason });
  }
  throw new ApiError('invalid_url', `URL refused: ${shape.message}.`, { reason: shape.reason });
}

/** The URL policy of the destination check, which the shape check applies too (EndpointDeps.destinations). */
const urlPolicy = (deps: EndpointDeps) => ({ httpsOnly: deps.destinations?.httpsOnly ?? false });

/**
 * The registration-time destination check of a URL that passed the shape check under the same policy, when a
 * checker is wired in; returns the URL to store. Its refusals are the destination's (address or resolution).
 */
async function checkDestination(deps: EndpointDeps, url: string): Promise<string> {
  if (!deps.destinations) return url;
  const verdict = await deps.destinations.check(url);
  if (!verdict.ok) {
    throw new ApiError('destination_not_allowed', `URL refused: ${verdict.reason}.`, {
      reason: 'destination_not_allowed',
    });
  }
  return verdict.url;
}

export function checkEventTypes(filters: readonly string[]): string[] {
  if (filters.length < 1 || filters.length > MAX_EVENT_TYPE_FILTERS) {
    throw new ApiError('validation_failed', `event_types needs 1 to ${MAX_EVENT_TYPE_FILTERS} filters.`);
  }
  const bad = filters.find((f) => f.length > EVENT_TYPE_FILTER_MAX || !isValidEventTypeFilter(f));
  if (bad !== undefined) {
    throw new ApiError('validation_failed', 'event_types holds exact types, `prefix.*` or `*`.', {
      field: 'event_types',
      value: bad,
    });
  }
  if (new Set(filters).size !== filters.length) {
    throw new ApiError('validation_failed', 'event_types must not repeat a filter.', {
      field: 'event_types',
    });
  }
  return [...filters];
}

/** Validated custom headers with lower-case names, or throws. */
export function checkCustomHeaders(headers: Record<string, string>): Record<string, string> {
  // A Map, then fromEntries: a header named `__proto__` must stay a plain own property.
  const out = new Map<string, string>();
  let bytes = 0;
  for (const [given, value] of Object.entries(headers)) {
    const name = given.toLowerCase();
    if (name.length > MAX_HEADER_NAME_LENGTH || !HEADER_NAME_RE.test(name)) {
      throw new ApiError('validation_failed', 'Header names must be HTTP tokens.', { header: given });
    }
    const refused = headerRefusal(name);
    if (refused !== null) {
      throw new ApiError('header_not_allowed', `The ${name} header ${refused}; it cannot be customised.`, {
        header: given,
      });
    }
    if (out.has(name)) {
      throw new ApiError('validation_failed', 'Header names must be unique (case-insensitively).', {
        header: given,
      });
    }
    if (typeof value !== 'string' || !HEADER_VALUE_RE.test(value)) {
      throw new ApiError(
        'validation_failed',
        'Header values must be printable ASCII without line breaks or surrounding whitespace.',
        { header: given },
      );
    }
    bytes += name.length + value.length;
    out.set(name, value);
  }
  if (out.size > MAX_CUSTOM_HEADERS) {
    throw new ApiError('validation_failed', `At most ${MAX_CUSTOM_HEADERS} custom headers.`);
  }
  if (bytes > MAX_CUSTOM_HEADER_BYTES) {
    throw new ApiError(
      'validation_failed',
      `Custom header names and values may total at most ${MAX_CUSTOM_HEADER_BYTES} bytes.`,
    );
  }
  return Object.fromEntries(out);
}

function checkMaxConcurrency(n: number): number {
  if (!Number.isInteger(n) || n < 1 || n > MAX_CONCURRENCY) {
    throw new ApiError('validation_failed', `max_concurrency must be 1 to ${MAX_CONCURRENCY}.`);
  }
  return n;
}

// ---------------------------------------------------------------------------------------------------------------
// Endpoints
// ---------------------------------------------------------------------------------------------------------------

function newSecret(deps: EndpointDeps, tenantId: string, endpointId: string, now: number) {
  const value = generateSecret(deps.random);
  const record: SecretRecord = {
    id: newId('secret', now, deps.random.bytes(10)),
    endpointId,
    tenantId,
    sealed: deps.keys.seal(Buffer.from(value, 'utf8'), secretAad(tenantId, endpointId)),
    activeFrom: now,
    activeUntil: null,
    createdAt: now,
  };
  return { record, value };
}

export async function createEndpoint(deps: EndpointDeps, by: AuditActor, input: EndpointInput) {
  const { tenantId } = by;
  const shapedUrl = canonicalEndpointUrl(input.url, urlPolicy(deps));
  const eventTypes = checkEventTypes(input.eventTypes);
  const headers = checkCustomHeaders(input.headers ?? {});
  const maxConcurrency = checkMaxConcurrency(input.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY);
  const url = await checkDestination(deps, shapedUrl);
  const now = deps.clock.now();
  const endpoint: EndpointRecord = {
    id: newId('endpoint', now, deps.random.bytes(10)),
    tenantId,
    url,
    description: input.description ?? null,
    eventTypes,
    ordering: input.ordering ?? 'none',
    maxConcurrency,
    headers,
    status: 'enabled',
    disabledReason: null,
    createdAt: now,
    updatedAt: now,
  };
  const secret = newSecret(deps, tenantId, endpoint.id, now);
  await deps.store.endpointCreate({
    endpoint,
    secret: secret.record,
    sharedLanes: deps.sharedLanes,
    audit: auditOf(
      deps,
      by,
      { action: 'endpoint.created', targetType: 'endpoint', targetId: endpoint.id },
      () => ({ url, event_types: eventTypes, secret_id: secret.record.id }),
    ),
  });
  return { endpoint, secret: secret.record, secretValue: secret.value };
}

export async function getEndpoint(deps: EndpointDeps, tenantId: string | null, id: string) {
  const endpoint = await deps.store.endpointGet({ id, tenantId });
  if (!endpoint) throw new ApiError('not_found', 'No such endpoint.');
  return endpoint;
}

/**
 * Applies a partial change. A URL that differs from the stored one (after canonicalisation) needs a valid step-up
 * token; the input is validated first, so a typo is reported before the tenant is asked for a TOTP code.
 */
export async function updateEndpoint(
  deps: EndpointDeps,
  input: {
    by: AuditActor;
    id: string;
    patch: EndpointPatchInput;
    stepUpToken: string | string[] | undefined;
  },
): Promise<EndpointRecord> {
  const { by, id, patch: given } = input;
  const { tenantId } = by;
  const patch: EndpointPatch = {};
  const shapedUrl = given.url !== undefined ? canonicalEndpointUrl(given.url) : undefined;
  if (given.eventTypes !== undefined) patch.eventTypes = checkEventTypes(given.eventTypes);
  if (given.headers !== undefined) patch.headers = checkCustomHeaders(given.headers);
  if (given.maxConcurrency !== undefined) patch.maxConcurrency = checkMaxConcurrency(given.maxConcurrency);
  if (given.ordering !== undefined) patch.ordering = given.ordering;
  if (given.description !== undefined) patch.description = given.description;

  const current = await getEndpoint(deps, tenantId, id);
  if (shapedUrl !== undefined && shapedUrl !== current.url) {
    // A new URL meets the policy in force (an unchanged one stored earlier is left as it is), before step-up.
    canonicalEndpointUrl(shapedUrl, urlPolicy(deps));
    requireStepUp(deps, tenantId, input.stepUpToken);
    patch.url = await checkDestination(deps, shapedUrl);
  }
  const changed = (Object.keys(PATCH_FIELD_NAMES) as Array<keyof EndpointPatchInput>)
    .filter((k) => given[k] !== undefined)
    .map((k) => PATCH_FIELD_NAMES[k]);
  const updated = await deps.store.endpointUpdate({
    id,
    tenantId,
    patch,
    now: deps.clock.now(),
    audit: auditOf(
      deps,
      by,
      {
        action: patch.url !== undefined ? 'endpoint.url_changed' : 'endpoint.updated',
        targetType: 'endpoint',
        targetId: id,
      },
      () => ({ changed }),
    ),
  });
  if (!updated) throw new ApiError('not_found', 'No such endpoint.');
  return updated;
}

/** The API's names of the fields a patch may carry, for the audit record. */
const PATCH_FIELD_NAMES: Record<keyof EndpointPatchInput, string> = {
  url: 'url',
  description: 'description',
  eventTypes: 'event_types',
  ordering: 'ordering',
  maxConcurrency: 'max_concurrency',
  headers: 'headers',
};

export async function deleteEndpoint(deps: EndpointDeps, by: AuditActor, id: string): Promise<void> {
  const deleted = await deps.store.endpointDelete({
    id,
    tenantId: by.tenantId,
    now: deps.clock.now(),
    audit: auditOf(deps, by, { action: 'endpoint.deleted', targetType: 'endpoint', targetId: id }),
  });
  if (!deleted) throw new ApiError('not_found', 'No such endpoint.');
}

/** Disables or enables an endpoint as the tenant asked (re-enabling with a backlog choice: enableEndpoint). */
export async function setEndpointStatus(
  deps: EndpointDeps,
  input: { by: AuditActor; id: string; status: EndpointStatus },
): Promise<EndpointRecord> {
  const endpoint = await deps.store.endpointSetStatus({
    id: input.id,
    tenantId: input.by.tenantId,
    status: input.status,
    reason: input.status === 'disabled' ? 'disabled_by_tenant' : null,
    now: deps.clock.now(),
    audit: auditOf(deps, input.by, {
      action: input.status === 'disabled' ? 'endpoint.disabled' : 'endpoint.enabled',
      targetType: 'endpoint',
      targetId: input.id,
    }),
  });
  if (!endpoint) throw new ApiError('not_found', 'No such endpoint.');
  return endpoint;
}

// ---------------------------------------------------------------------------------------------------------------
// Secrets
// ---------------------------------------------------------------------------------------------------------------

/** A new secret, shown once; the newest previously active one stays active until now + overlap. */
export async function rotateSecret(
  deps: EndpointDeps,
  input: { by: AuditActor; endpointId: string; overlapSeconds: number },
) {
  const endpoint = await getEndpoint(deps, input.by.tenantId, input.endpointId);
  const now = deps.clock.now();
  const secret = newSecret(deps, endpoint.tenantId, endpoint.id, now);
  // The one kept for the overlap, if it is still active (an overlap of 0 retires it now).
  const stillActive = (kept: SecretRecord | null) =>
    kept !== null && (kept.activeUntil === null || kept.activeUntil > now) ? kept : null;
  const kept = await deps.store.secretRotate({
    secret: secret.record,
    previousActiveUntil: now + input.overlapSeconds * 1000,
    now,
    audit: auditOf<SecretRecord | null>(
      deps,
      input.by,
      { action: 'secret.rotated', targetType: 'endpoint', targetId: endpoint.id },
      (k) => ({ secret_id: secret.record.id, previous_id: stillActive(k)?.id ?? null }),
    ),
  });
  if (kept === 'not_found') throw new ApiError('not_found', 'No such endpoint.');
  return { secret: secret.record, secretValue: secret.value, previous: stillActive(kept) };
}

/** Active secrets (metadata only is ever shown), newest first. `tenantId` null: the operator. */
export async function listSecrets(
  deps: EndpointDeps,
  input: { tenantId: string | null; endpointId: string },
) {
  const endpoint = await getEndpoint(deps, input.tenantId, input.endpointId);
  return deps.store.secretListActive({ endpointId: endpoint.id, now: deps.clock.now() });
}

export async function retireSecret(
  deps: EndpointDeps,
  input: { by: AuditActor; endpointId: string; secretId: string },
): Promise<void> {
  const endpoint = await getEndpoint(deps, input.by.tenantId, input.endpointId);
  const result = await deps.store.secretRetire({
    id: input.secretId,
    endpointId: endpoint.id,
    now: deps.clock.now(),
    audit: auditOf(
      deps,
      input.by,
      { action: 'secret.retired', targetType: 'endpoint', targetId: endpoint.id },
      () => ({ secret_id: input.secretId }),
    ),
  });
  if (result === 'not_found') throw new ApiError('not_found', 'No such active secret on this endpoint.');
  if (result === 'last') throw new ApiError('last_active_secret');
}
