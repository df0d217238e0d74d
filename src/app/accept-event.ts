/**
 * The capture plane's one use case (ADR-01): validate, assign an id, persist durably, acknowledge — in that order,
 * consulting nothing but the tenant directory and the event log. This file must never import endpoints,
 * subscriptions or an HTTP client; scripts/check-boundaries.ts enforces it.
 */
import { ApiError } from '../domain/errors.ts';
import { checkDataDepth, eventRequestHash, IDEMPOTENCY_KEY_PATTERN } from '../domain/event-rules.ts';
import { newId } from '../domain/ids.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { EventRecord, Store } from '../ports/store.ts';
import type { GroupCommitter } from './group-commit.ts';
import type { TenantDirectory } from './tenant-directory.ts';

export interface AcceptEventInput {
  tenantId: string;
  type: string;
  /**
   * The JSON text of `data` (an object: the route's schema checked the parsed value), exactly as the producer sent
   * it (domain/raw-json-member.ts). Checked for depth, stored, hashed for idempotency and delivered as is:
   * re-serialising the parsed value would change what the producer sent (digits beyond 2^53, `1.10`, `-0`,
   * escapes, duplicate keys).
   */
  dataText: string;
  resourceId: string | null;
  idempotencyKey: string | null;
  /** The producer's traceparent, already parsed (domain/trace-context.ts); null: none or invalid. */
  traceParent?: string | null;
}

export interface AcceptEventDeps {
  store: Store;
  clock: Clock;
  random: Random;
  tenants: TenantDirectory;
  committer: GroupCommitter;
}

export async function acceptEvent(
  deps: AcceptEventDeps,
  input: AcceptEventInput,
): Promise<{ event: EventRecord; replayed: boolean }> {
  if (input.idempotencyKey !== null && !IDEMPOTENCY_KEY_PATTERN.test(input.idempotencyKey)) {
    throw new ApiError('validation_failed', 'Idempotency-Key must be 1-255 printable ASCII characters.', {
      header: 'idempotency-key',
    });
  }
  checkDataDepth(input.dataText);
  if (!(await deps.tenants.exists(input.tenantId))) throw new ApiError('tenant_not_found');

  const now = deps.clock.now();
  const outcome = await deps.committer.submit({
    id: newId('event', now, deps.random.bytes(10)),
    tenantId: input.tenantId,
    type: input.type,
    resourceId: input.resourceId,
    data: input.dataText,
    idempotencyKey: input.idempotencyKey,
    requestHash:
      input.idempotencyKey === null ? null : eventRequestHash(input.type, input.resourceId, input.dataText),
    createdAt: now,
    traceParent: input.traceParent ?? null,
  });
  if (outcome.kind === 'key_conflict') {
    throw new ApiError('idempotency_key_reused', undefined, { event_id: outcome.event.id });
  }
  return { event: outcome.event, replayed: outcome.kind === 'duplicate' };
}
