/**
 * Operator use cases: tenants (each created with its tenant key and step-up TOTP seed, shown once) and producer
 * keys; and replacing a tenant's key. Keys are stored as SHA-256 hashes; the plaintext exists only in the answer
 * that creates it.
 */
import { generateApiKey } from '../domain/api-keys.ts';
import { ApiError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { base32Encode, otpauthUri } from '../domain/totp.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { ApiKeyRecord, Store, TenantRecord } from '../ports/store.ts';
import { auditOf } from './audit.ts';
import type { Principal } from './auth.ts';

export interface ManageDeps {
  store: Store;
  clock: Clock;
  random: Random;
  keys: KeyService;
}

export const totpAad = (tenantId: string) => `tenant:${tenantId}/totp`;

/** A new tenant key: the key itself (shown once) and the record that keeps only its hash. */
function newTenantKey(deps: ManageDeps, tenantId: string, now: number) {
  const generated = generateApiKey('tenant', deps.random);
  const record: ApiKeyRecord = {
    id: newId('apiKey', now, deps.random.bytes(10)),
    kind: 'tenant',
    tenantId,
    name: null,
    hash: generated.hash,
    prefix: generated.prefix,
    createdAt: now,
    revokedAt: null,
  };
  return { generated, record };
}

export async function createTenant(deps: ManageDeps, input: { name: string }) {
  const now = deps.clock.now();
  const tenantId = newId('tenant', now, deps.random.bytes(10));
  const seed = deps.random.bytes(20);
  const tenant: TenantRecord = {
    id: tenantId,
    name: input.name,
    totpSeedSealed: deps.keys.seal(seed, totpAad(tenantId)),
    createdAt: now,
    deletedAt: null,
  };
  const { generated, record: tenantKey } = newTenantKey(deps, tenantId, now);
  await deps.store.tenantCreate({ tenant, tenantKey });
  return {
    tenant,
    tenantKey: generated.key,
    totpSeed: base32Encode(seed),
    otpauthUri: otpauthUri(`Hookrail:${tenantId}`, seed),
  };
}

export async function createProducerKey(deps: ManageDeps, input: { name: string | null }) {
  const now = deps.clock.now();
  const generated = generateApiKey('producer', deps.random);
  const record: ApiKeyRecord = {
    id: newId('apiKey', now, deps.random.bytes(10)),
    kind: 'producer',
    tenantId: null,
    name: input.name,
    hash: generated.hash,
    prefix: generated.prefix,
    createdAt: now,
    revokedAt: null,
  };
  await deps.store.apiKeyCreate({ key: record });
  return { record, key: generated.key };
}

/**
 * Issues a new key for the tenant and revokes every live one it had, in one transaction with its audit record: a
 * leaked key ends without deleting the tenant. Who may ask (the operator, or the tenant itself with step-up) is
 * the caller's check. The old key stops at once in the store; a process that cached it accepts it until that
 * cache entry expires (HOOKRAIL_AUTH_CACHE_MS).
 */
export async function replaceTenantKey(deps: ManageDeps, by: Principal, tenantId: string) {
  const now = deps.clock.now();
  const { generated, record: key } = newTenantKey(deps, tenantId, now);
  const replaced = await deps.store.tenantKeyReplace({
    tenantId,
    key,
    now,
    audit: auditOf(
      deps,
      { tenantId, principal: by },
      { action: 'tenant.key_replaced', targetType: 'tenant', targetId: tenantId },
      // The id and the display prefix only: the key itself is in the answer and nowhere else.
      () => ({ key_id: key.id, prefix: key.prefix }),
    ),
  });
  if (!replaced) throw new ApiError('tenant_not_found');
  return { record: key, key: generated.key };
}

/**
 * DELETE /v1/tenants/:id (the operator, with step-up): the deletion and its audit record `tenant.deleted`, in one
 * transaction. The record stays in the deleted tenant's trail, which the operator reads (GET /v1/audit-events).
 */
export async function deleteTenant(deps: ManageDeps, by: Principal, tenantId: string): Promise<void> {
  const deleted = await deps.store.tenantDelete({
    id: tenantId,
    now: deps.clock.now(),
    audit: auditOf(
      deps,
      { tenantId, principal: by },
      { action: 'tenant.deleted', targetType: 'tenant', targetId: tenantId },
    ),
  });
  if (!deleted) throw new ApiError('not_found');
}
