import { afterAll, beforeAll, expect, it } from 'vitest';
import { SmtpSink } from '../../../test/support/smtp-sink.ts';
import { createSmtpMailer } from './smtp-mailer.ts';

let sink: SmtpSink;
beforeAll(async () => {
  sink = await SmtpSink.start();
});
afterAll(() => sink?.close());

it('delivers a message to a real SMTP server', async () => {
  const mailer = createSmtpMailer({ url: sink.url, from: 'hookrail@example.com' });
  await mailer.send({ to: 'ops@acme.example', subject: 'Endpoint failing', text: 'first dead letter' });
  await mailer.close();
  expect(sink.messages).toHaveLength(1);
  expect(sink.messages[0]?.to).toEqual(['ops@acme.example']);
  expect(sink.messages[0]?.raw).toContain('Subject: Endpoint failing');
  expect(sink.messages[0]?.raw).toContain('first dead letter');
});

it('rejects when the server refuses, so the outbox can retry', async () => {
  const mailer = createSmtpMailer({ url: sink.url, from: 'hookrail@example.com' });
  sink.refuse = 'try again later';
  await expect(mailer.send({ to: 'ops@acme.example', subject: 's', text: 't' })).rejects.toThrow();
  sink.refuse = null;
  await mailer.close();
});
