/** What the conformance suites share: fixed time units, id factories, a tenant, and endpoint and secret records. */
import { randomBytes } from 'node:crypto';
import { newId } from '../../src/domain/ids.ts';
import type { DeliveryIdFactory, EndpointRecord, SecretRecord } from '../../src/ports/delivery-store.ts';
import type { Store, TenantRecord } from '../../src/ports/store.ts';
import { NOW } from './store-conformance.ts';

export const SECOND = 1_000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
export const LEASE_MS = 30 * SECOND;

export const id = (kind: Parameters<typeof newId>[0], at = NOW) => newId(kind, at, randomBytes(10));
export const ids: DeliveryIdFactory = { delivery: () => id('delivery'), webhookId: () => id('message') };

/** A tenant with its tenant key: the record every other one hangs off. */
export async function createTenant(store: Store, at: number): Promise<TenantRecord> {
  const tenant: TenantRecord = {
    id: id('tenant', at),
    name: `tenant ${at}`,
    totpSeedSealed: 'sealed:x',
    createdAt: at,
    deletedAt: null,
  };
  await store.tenantCreate({
    tenant,
    tenantKey: {
      id: id('apiKey', at),
      kind: 'tenant',
      tenantId: tenant.id,
      name: null,
      hash: randomBytes(32).toString('hex'),
      prefix: 'hkt_abcd',
      createdAt: at,
      revokedAt: null,
    },
  });
  return tenant;
}

/** An enabled endpoint subscribed to everything, created at `o.createdAt` (default NOW); `o` overrides. */
export function endpointRecord(tenantId: string, o: Partial<EndpointRecord> = {}): EndpointRecord {
  const at = o.createdAt ?? NOW;
  return {
    id: id('endpoint', at),
    tenantId,
    url: 'https://example.com/hooks',
    description: null,
    eventTypes: ['*'],
    ordering: 'none',
    maxConcurrency: 10,
    headers: {},
    status: 'enabled',
    disabledReason: null,
    createdAt: at,
    updatedAt: at,
    ...o,
  };
}

/** An active secret of `ep`, from its creation on; `o` overrides. */
export function secretRecord(ep: EndpointRecord, o: Partial<SecretRecord> = {}): SecretRecord {
  const at = o.createdAt ?? ep.createdAt;
  return {
    id: id('secret', at),
    endpointId: ep.id,
    tenantId: ep.tenantId,
    sealed: `sealed:${randomBytes(8).toString('hex')}`,
    activeFrom: at,
    activeUntil: null,
    createdAt: at,
    ...o,
  };
}
