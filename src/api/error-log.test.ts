import { describe, expect, it } from 'vitest';
import { controlApiDeps, OPERATOR_TOKEN } from '../../test/support/control-api.ts';
import { captureLog } from '../../test/support/log-capture.ts';
import { createSqliteStore } from '../adapters/sqlite/sqlite-store.ts';
import { buildApi } from './build-api.ts';

describe('the API log', () => {
  it('logs an unexpected error once, with its request id, and answers 500 internal_error without the detail', async () => {
    const { logger, lines } = captureLog();
    const store = createSqliteStore({ filename: ':memory:' });
    await store.migrate();
    // A store whose event read fails the way a bug would: not a store outage, not an API error.
    const broken = Object.create(store) as typeof store;
    broken.eventGet = async () => {
      throw new Error('event row could not be mapped');
    };
    const app = await buildApi(controlApiDeps(broken, { logger }));
    try {
      const res = await app.inject({
        method: 'GET',
        url: '/v1/events/evt_01J00000000000000000000000',
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
      });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({
        error: { code: 'internal_error', message: expect.any(String) },
      });
      expect(res.body).not.toContain('could not be mapped');

      const errors = lines.filter((l) => l.msg === 'unhandled error');
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({
        level: 50,
        reqId: expect.any(String),
        err: { message: 'event row could not be mapped' },
      });
      // Request logging is off: at intake rates a line per request would be most of the log.
      expect(lines.filter((l) => l.msg !== 'unhandled error')).toEqual([]);
    } finally {
      await app.close();
      await store.close();
    }
  });
});
