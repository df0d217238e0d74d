/**
 * The Store conformance suite against PostgreSQL. Every test gets its own schema (created by migrate() through the
 * store's search_path and dropped afterwards), so tests and test files never share rows.
 */
import pg from 'pg';
import { createPostgresStore } from '../../src/adapters/postgres/postgres-store.ts';
import type { Store } from '../../src/ports/store.ts';
import { dropSchema, freshSchemaName, postgresUrl } from '../support/postgres.ts';
import { runDeliveryConformance } from './delivery-conformance.ts';
import { runIdempotencyWindowConformance } from './idempotency-window.ts';
import { runLaneConformance } from './lane-conformance.ts';
import { runOperationsConformance } from './operations-conformance.ts';
import { runOrderingProperties } from './ordering-properties.ts';
import { runStoreConformance, type StoreConformanceOptions } from './store-conformance.ts';
import { runTenantKeyReplaceConformance } from './tenant-key-replace.ts';

const schemas = new WeakMap<Store, string>();

const options: StoreConformanceOptions = {
  name: 'postgres',
  async createStore() {
    const schema = freshSchemaName('conf');
    const store = createPostgresStore({ connectionString: postgresUrl(), schema, poolSize: 10 });
    schemas.set(store, schema);
    return store;
  },
  async destroyStore(store) {
    await store.close();
    const schema = schemas.get(store);
    if (schema) await dropSchema(postgresUrl(), schema);
  },
  async rawSql(store, sql) {
    const client = new pg.Client({ connectionString: postgresUrl() });
    await client.connect();
    try {
      await client.query(`SET search_path TO "${schemas.get(store)}"`);
      await client.query(sql);
    } finally {
      await client.end();
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
