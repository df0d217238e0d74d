/** The words of each notification (e-mail subject and body, and the notifications log). */
import type { NoticeCause } from './dead-letter-notice.ts';

export interface NoticeSubject {
  endpointId: string;
  url: string;
  at: number;
}

export function noticeText(
  kind: NoticeCause | 'digest' | 'auto_disabled' | 'recovered' | 'disabled',
  s: NoticeSubject & { count: number },
): { subject: string; body: string } {
  const when = new Date(s.at).toISOString();
  const where = `endpoint ${s.endpointId} (${s.url})`;
  switch (kind) {
    case 'dead_letter':
      return {
        subject: `Hookrail: deliveries to ${s.url} are failing`,
        body:
          `A delivery to ${where} was dead-lettered at ${when} after its retries ran out` +
          (s.count > 0 ? `, as were ${s.count} earlier ones since the last notice` : '') +
          '.\n\nHookrail keeps retrying the rest on its schedule. Dead letters are kept 30 days: once the endpoint ' +
          'works again, replay them (POST /v1/endpoints/:id/replay) — every copy keeps its webhook-id.\n' +
          'Further dead letters for this endpoint in the next 24 hours are gathered into one digest.',
      };
    case 'permanent_failure':
      return {
        subject: `Hookrail: ${s.url} rejected a delivery`,
        body:
          `${where} answered a delivery at ${when} with a status that is not retried (for example 4xx), so it was ` +
          'dead-lettered at once. Check the request inspector for the response, fix the endpoint, and replay.\n' +
          'Further rejections in the next 24 hours are gathered into one digest.',
      };
    case 'digest':
      return {
        subject: `Hookrail: ${s.count} more failed deliveries to ${s.url}`,
        body: `${s.count} more deliveries to ${where} were dead-lettered in the last 24 hours (as of ${when}).`,
      };
    case 'recovered':
      return {
        subject: `Hookrail: deliveries to ${s.url} are getting through again`,
        body:
          `${where} answered a delivery successfully at ${when}, ending the failures we told you about. ` +
          'Pending deliveries go out on their schedule again (after an open circuit, at a rate that ramps up over ' +
          'five minutes). Deliveries dead-lettered meanwhile are not retried automatically: replay them ' +
          '(POST /v1/endpoints/:id/replay) — every copy keeps its webhook-id.',
      };
    case 'disabled':
      return {
        subject: `Hookrail: ${s.url} was disabled`,
        body:
          `${where} was disabled at ${when} through the API or the console. Nothing is sent to it while it is ` +
          'disabled; events for it still create deliveries, which wait as its backlog, and nothing is deleted. ' +
          'Re-enable it with an explicit choice: deliver the backlog, skip it, or resume from a point in time ' +
          '(POST /v1/endpoints/:id/enable); GET /v1/endpoints/:id/backlog shows its size and estimated drain time ' +
          'first.',
      };
    case 'auto_disabled':
      return {
        subject: `Hookrail: ${s.url} was disabled after 72 hours of failures`,
        body:
          `${where} has failed continuously for 72 hours with no success and was disabled at ${when}. ` +
          'Its undelivered backlog is kept. Re-enable it with an explicit choice: deliver the backlog, skip it, ' +
          'or resume from a point in time (POST /v1/endpoints/:id/enable); GET /v1/endpoints/:id/backlog shows ' +
          'its size and estimated drain time first.',
      };
  }
}
