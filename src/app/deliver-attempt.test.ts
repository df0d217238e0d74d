/**
 * One attempt's record on a real clock, through the real sender to a local server: the time split (queue, platform,
 * consumer) and the response kept. The e2e tests run the app on a fake clock, where these durations are all zero.
 * And the record of an attempt Hookrail could not make (`platform_error`), on a fake clock.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { UndiciSender } from '../adapters/http/undici-sender.ts';
import { systemClock } from '../adapters/system-clock.ts';
import { MAX_ATTEMPTS, maxRetryDelayMs } from '../domain/retry-schedule.ts';
import { generateSecret } from '../domain/signature.ts';
import type { LeasedDelivery } from '../ports/delivery-store.ts';
import type { HttpSender } from '../ports/http-sender.ts';
import { deliverAttempt, PLATFORM_ERROR_MESSAGE, platformFailedAttempt } from './deliver-attempt.ts';

let server: Server;
let url: string;
const sender = new UndiciSender({ allowNetworks: ['127.0.0.1/32'] });

beforeAll(async () => {
  // Answers 200 at once, then drips 1 KiB every 5 ms and never ends: the sender cuts it at 64 KiB.
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(
        () => (res.destroyed ? clearInterval(timer) : res.write('a'.repeat(1024))),
        5,
      );
      res.on('close', () => clearInterval(timer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});

afterAll(async () => {
  await sender.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const leased = (dueAt: number): LeasedDelivery => ({
  delivery: {
    id: 'dlv_1',
    tenantId: 'ten_1',
    endpointId: 'ep_1',
    eventId: 'evt_1',
    eventType: 'order.created',
    resourceId: null,
    webhookId: 'msg_1',
    status: 'pending',
    attempts: 0,
    nextAttemptAt: dueAt,
    firstAttemptAt: null,
    lastAttemptAt: null,
    statusReason: null,
    replayedFrom: null,
    createdAt: dueAt,
    updatedAt: dueAt,
  },
  endpoint: { id: 'ep_1', tenantId: 'ten_1', url, headers: {} },
  event: { id: 'evt_1', type: 'order.created', createdAt: dueAt, data: '{"n":1}' },
  leaseUntil: dueAt + 60_000,
});

describe('deliverAttempt on a real clock', () => {
  it('splits the time: queue due → start, platform start → wire, consumer wire → the answer read, body included', async () => {
    const random = seededRandom(7);
    const secret = generateSecret(random);
    const leasedAt = Date.now();
    const { attempt, next } = await deliverAttempt(
      {
        sender,
        clock: systemClock,
        random,
        userAgent: 'Hookrail/test',
        secretsFor: async () => [secret],
      },
      leased(leasedAt - 250),
      'w1',
      leasedAt,
    );
    expect(next).toEqual({ status: 'delivered' });
    expect(attempt).toMatchObject({
      outcome: 'delivered',
      statusCode: 200,
      queueMs: 250,
      startedAt: leasedAt,
    });
    expect(Buffer.from(attempt.responseBody!, 'base64')).toEqual(Buffer.alloc(4096, 'a'));
    // 64 KiB at 1 KiB per 5 ms or slower: at least ~315 ms of reading, the consumer's; ours was a loopback connect.
    expect(attempt.consumerMs).toBeGreaterThanOrEqual(300);
    expect(attempt.consumerMs).toBeLessThan(10_000);
    expect(attempt.platformMs).toBeLessThan(attempt.consumerMs!);
    expect(attempt.platformMs + attempt.consumerMs!).toBeLessThanOrEqual(
      attempt.finishedAt - attempt.startedAt,
    );
  });
});

describe('an attempt Hookrail cannot make: platform_error', () => {
  const clock = new FakeClock();
  const refusing: HttpSender = {
    send: async () => {
      throw new Error('must not be called');
    },
    close: async () => {},
  };

  it('no active signing secret: nothing is sent, a retryable platform_error is recorded and rescheduled', async () => {
    const at = clock.now();
    const { attempt, next, probe } = await deliverAttempt(
      {
        sender: refusing,
        clock,
        random: seededRandom(1),
        userAgent: 'Hookrail/test',
        secretsFor: async () => [],
      },
      { ...leased(at - 100), mode: 'probe' },
      'w1',
      at,
    );
    expect(attempt).toMatchObject({
      attemptNo: 1,
      outcome: 'retryable',
      errorClass: 'platform_error',
      errorMessage: 'no active signing secret',
      statusCode: null,
      request: { hops: [] },
      queueMs: 100,
      consumerMs: null,
    });
    expect(probe).toBe(true);
    if (next.status !== 'pending') throw new Error('expected a retry');
    expect(next.nextAttemptAt - at).toBeLessThanOrEqual(maxRetryDelayMs(1));
  });

  it('a thrown attempt is recorded with a generic message, on the schedule, and dead-lettered at the 12th', () => {
    const random = seededRandom(2);
    const at = clock.now();
    const base = leased(at);
    const first = platformFailedAttempt({ clock, random }, base, 'w1', at);
    expect(first).toMatchObject({
      leaseOwner: 'w1',
      probe: false,
      attempt: {
        attemptNo: 1,
        outcome: 'retryable',
        errorClass: 'platform_error',
        errorMessage: PLATFORM_ERROR_MESSAGE,
        startedAt: at,
        finishedAt: at,
        request: { hops: [] },
      },
      next: { status: 'pending' },
    });
    const last = platformFailedAttempt(
      { clock, random },
      { ...base, delivery: { ...base.delivery, attempts: MAX_ATTEMPTS - 1, firstAttemptAt: at - 3_600_000 } },
      'w1',
      at,
    );
    expect(last.attempt.attemptNo).toBe(MAX_ATTEMPTS);
    expect(last.next).toEqual({ status: 'dead', reason: 'max_attempts' });
  });
});
