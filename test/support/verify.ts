/**
 * Consumer-side verification with the real Standard Webhooks libraries (`standardwebhooks`, and `svix@1`). Their
 * 300 s tolerance reads Date.now, so the check runs with only `Date` faked to the request's own timestamp.
 */
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { vi } from 'vitest';
import type { ReceivedRequest } from './receiver.ts';

export function verifyWithLibraries(secret: string, req: ReceivedRequest): unknown {
  const headers = {
    'webhook-id': req.headers['webhook-id'] as string,
    'webhook-timestamp': req.headers['webhook-timestamp'] as string,
    'webhook-signature': req.headers['webhook-signature'] as string,
  };
  vi.useFakeTimers({ toFake: ['Date'] });
  try {
    vi.setSystemTime(Number(headers['webhook-timestamp']) * 1000 + 1000);
    const a = new StandardWebhook(secret).verify(req.body.toString('utf8'), headers);
    const b = new SvixWebhook(secret).verify(req.body.toString('utf8'), headers);
    if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error('libraries disagree');
    return a;
  } finally {
    vi.useRealTimers();
  }
}
