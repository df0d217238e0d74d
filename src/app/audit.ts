/**
 * The audit trail's records (ADR-16). A use case hands the store an AuditOf with the change, and the store writes
 * the record in the change's own transaction: a change never commits without its record, and a refused or
 * failed change leaves none.
 */
import { newId } from '../domain/ids.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { AuditOf } from '../ports/delivery-store.ts';
import type { Principal } from './auth.ts';

export function actorOf(p: Principal): string {
  return p.kind === 'tenant'
    ? `tenant_key:${p.keyId}`
    : p.kind === 'producer'
      ? `producer_key:${p.keyId}`
      : 'operator';
}

/** Who made a change, and to which tenant's trail it belongs. */
export interface AuditActor {
  tenantId: string;
  principal: Principal;
}

/**
 * The record of one change. `details` reads what the change did (ids it minted, counts); returning null records
 * nothing, for a request that in the end changed nothing.
 */
export function auditOf<R = void>(
  deps: { clock: Clock; random: Random },
  who: AuditActor,
  what: { action: string; targetType: string; targetId: string },
  details: (result: R) => Record<string, unknown> | null = () => ({}),
): AuditOf<R> {
  return (result) => {
    const d = details(result);
    if (d === null) return null;
    const now = deps.clock.now();
    return {
      id: newId('audit', now, deps.random.bytes(10)),
      tenantId: who.tenantId,
      actor: actorOf(who.principal),
      action: what.action,
      targetType: what.targetType,
      targetId: what.targetId,
      details: d,
      createdAt: now,
    };
  };
}
