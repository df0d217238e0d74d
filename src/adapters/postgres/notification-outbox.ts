/** Writing notifications to the outbox, as part of a larger statement (completion, operations). */
import type { NotificationKind } from '../../ports/delivery-store.ts';

/** A notification for the outbox; `emailTo` is the tenant's channel as read in the writing transaction. */
export interface NewNotification {
  id: string;
  tenantId: string;
  endpointId: string | null;
  kind: NotificationKind;
  subject: string;
  body: string;
  emailTo: string | null;
}

/**
 * A data-modifying CTE body that puts notifications in the outbox — `pending` and due at `now` when the tenant has
 * an e-mail channel, straight into the log (`logged`) otherwise — from seven arrays starting at parameter
 * `$first`; `now` is an SQL expression. `notificationValues` gives the arrays in the same order.
 */
export const insertNotificationsSql = (first: number, now: string) => {
  const p = (i: number) => `$${first + i}`;
  return `INSERT INTO notifications (id, tenant_id, endpoint_id, kind, subject, body, email_to, status, attempts,
            next_attempt_at, created_at)
          SELECT u.id, u.tenant_id, u.endpoint_id, u.kind, u.subject, u.body, u.email_to,
                 CASE WHEN u.email_to IS NULL THEN 'logged' ELSE 'pending' END, 0,
                 CASE WHEN u.email_to IS NULL THEN NULL ELSE ${now} END, ${now}
            FROM unnest(${p(0)}::text[], ${p(1)}::text[], ${p(2)}::text[], ${p(3)}::text[], ${p(4)}::text[],
                        ${p(5)}::text[], ${p(6)}::text[])
                 AS u(id, tenant_id, endpoint_id, kind, subject, body, email_to)`;
};
export const notificationValues = (ns: NewNotification[]): unknown[] => [
  ns.map((n) => n.id),
  ns.map((n) => n.tenantId),
  ns.map((n) => n.endpointId),
  ns.map((n) => n.kind),
  ns.map((n) => n.subject),
  ns.map((n) => n.body),
  ns.map((n) => n.emailTo),
];
