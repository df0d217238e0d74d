/**
 * API key writes of the PostgreSQL store: the insert every key write shares, and replacing a tenant's key.
 *
 * The replacement locks the tenant row first (FOR NO KEY UPDATE, the lock tenantDelete's UPDATE takes too), so it
 * serialises with a deletion of the tenant and with another replacement: under READ COMMITTED the UPDATE that
 * revokes the live keys then sees the key a replacement before it committed, and exactly one key stays live. A
 * replacement that waited for a deletion finds the tenant deleted and changes nothing. Lock order as everywhere:
 * tenants before the rows hanging off them (query-helpers.ts).
 */
import type { ApiKeyRecord, Store } from '../../ports/store.ts';
import { writeAudit } from './audit.ts';
import type { TxClient, TxRunner } from './migrate.ts';

export const API_KEY_COLUMNS = 'id, kind, tenant_id, name, hash, prefix, created_at, revoked_at';

export async function insertApiKey(db: TxClient, key: ApiKeyRecord): Promise<void> {
  await db.query(`INSERT INTO api_keys (${API_KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, [
    key.id,
    key.kind,
    key.tenantId,
    key.name,
    key.hash,
    key.prefix,
    key.createdAt,
    key.revokedAt,
  ]);
}

export function createPostgresTenantKeys({ tx }: { tx: TxRunner }): Pick<Store, 'tenantKeyReplace'> {
  return {
    tenantKeyReplace: ({ tenantId, key, now, audit }) =>
      tx(async (c) => {
        const live = await c.query(
          'SELECT 1 FROM tenants WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE',
          [tenantId],
        );
        if (live.rowCount !== 1) return false;
        await c.query(
          `UPDATE api_keys SET revoked_at = $2
            WHERE kind = 'tenant' AND tenant_id = $1 AND revoked_at IS NULL`,
          [tenantId, now],
        );
        await insertApiKey(c, key);
        await writeAudit(c, audit, undefined);
        return true;
      }),
  };
}
