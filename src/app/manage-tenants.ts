/**
 * Operator use cases: tenants (each created with its tenant key and step-up TOTP seed, shown once) and producer
 * keys. Keys are stored as SHA-256 hashes; the plaintext exists only in the creation response.
 */
import { generateApiKey } from '../domain/api-keys.ts';
import { newId } from '../domain/ids.ts';
import { base32Encode, otpauthUri } from '../domain/totp.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { ApiKeyRecord, Store, TenantRecord } from '../ports/store.ts';

export interface ManageDeps {
  store: Store;
  clock: Clock;
  random: Random;
  keys: KeyService;
}

export const totpAad = (tenantId: string) => `tenant:${tenantId}/totp`;

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
  const generated = generateApiKey('tenant', deps.random);
  const tenantKey: ApiKeyRecord = {
    id: newId('apiKey', now, deps.random.bytes(10)),
    kind: 'tenant',
    tenantId,
    name: null,
    hash: generated.hash,
    prefix: generated.prefix,
    createdAt: now,
    revokedAt: null,
  };
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
