/** The Store conformance suite against SQLite: each test gets a database file of its own. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createSqliteStore } from '../../src/adapters/sqlite/sqlite-store.ts';
import type { Store } from '../../src/ports/store.ts';
import { runDeliveryConformance } from './delivery-conformance.ts';
import { runIdempotencyWindowConformance } from './idempotency-window.ts';
import { runLaneConformance } from './lane-conformance.ts';
import { runOperationsConformance } from './operations-conformance.ts';
import { runOrderingProperties } from './ordering-properties.ts';
import { runStoreConformance, type StoreConformanceOptions } from './store-conformance.ts';
import { runTenantKeyReplaceConformance } from './tenant-key-replace.ts';

const dirs = new WeakMap<Store, string>();

const options: StoreConformanceOptions = {
  name: 'sqlite',
  async createStore() {
    const dir = mkdtempSync(join(tmpdir(), 'hookrail-conf-'));
    const store = createSqliteStore({ filename: join(dir, 'hookrail.db') });
    dirs.set(store, dir);
    return store;
  },
  async destroyStore(store) {
    await store.close();
    const dir = dirs.get(store);
    if (dir) rmSync(dir, { recursive: true, force: true });
  },
  async rawSql(store, sql) {
    const db = new Database(join(dirs.get(store)!, 'hookrail.db'));
    try {
      db.exec(sql);
    } finally {
      db.close();
    }
  },
};

runStoreConformance(options);
runDeliveryConformance(options);
runOperationsConformance(options);
runLaneConformance(options);
runOrderingProperties(options);
runIdempotencyWindowConformance(options);
runTenantKeyReplaceConformance(options);
