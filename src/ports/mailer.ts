/** Outbound e-mail for notifications: a channel independent of every endpoint (ADR-09). */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  /** Resolves once the SMTP server accepted the message; rejects otherwise (the outbox retries). */
  send(message: MailMessage): Promise<void>;
  close(): Promise<void>;
}
