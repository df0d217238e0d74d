/**
 * E-mail over SMTP with nodemailer. HOOKRAIL_SMTP_URL is a nodemailer connection URL
 * (`smtp://user:pass@host:587`, `smtps://…`). Timeouts are short: a failing mail server must never hold up anything
 * but the notification outbox, which retries.
 */
import nodemailer from 'nodemailer';
import type { Mailer, MailMessage } from '../../ports/mailer.ts';

export function createSmtpMailer(opts: { url: string; from: string }): Mailer {
  const transport = nodemailer.createTransport(opts.url, {
    connectionTimeout: 5_000,
    greetingTimeout: 5_000,
    socketTimeout: 10_000,
  } as never);
  return {
    async send(message: MailMessage) {
      await transport.sendMail({
        from: opts.from,
        to: message.to,
        subject: message.subject,
        text: message.text,
      });
    },
    async close() {
      transport.close();
    },
  };
}
