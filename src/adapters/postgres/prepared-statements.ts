/**
 * Named prepared statements for everything that runs inside a transaction — the delivery plane's hot paths (intake,
 * fan-out, leasing, completion) all do. Sent unnamed, every call is parsed, analysed and planned again: a quarter
 * of the database's CPU in bench:isolation (a sixth planning, a tenth parsing and analysis), for statements whose
 * text never changes. Named, each connection parses and analyses each statement once. Plans stay per call
 * (`plan_cache_mode = force_custom_plan`, set on every connection in postgres-store.ts): the statements take arrays
 * of ids, whose sizes a custom plan sees and a generic plan must guess — when PostgreSQL switched to generic plans
 * after five calls, bench:delivery on PostgreSQL fell from 855 to 682 attempts/s and its drain from 987 to 510/s.
 * (The lease, completion and expiry transactions are the exception: PROBES_ONLY in query-helpers.ts.)
 *
 * Limits. The name is derived from the text, so one text is one statement on every connection. Texts are a fixed
 * set (lane bindings and filter combinations multiply them a little); past MAX_NAMED distinct texts in a process,
 * further ones go unnamed, so no connection collects statements without bound. Statements select explicit column
 * lists, never `table.*`: a prepared statement whose result columns change under it (a migration by a newer
 * process during a rolling upgrade) would fail with "cached plan must not change result type".
 */
import { createHash } from 'node:crypto';
import type { PoolClient } from 'pg';
import type { TxClient } from './migrate.ts';

const MAX_NAMED = 1_000;
const names = new Map<string, string>();

function nameOf(text: string): string | null {
  let name = names.get(text);
  if (name === undefined) {
    if (names.size >= MAX_NAMED) return null;
    name = `hookrail_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/** The client as its transaction's statements see it: statements with parameters are sent as named statements. */
export function preparing(client: PoolClient): TxClient {
  return {
    query(text: string, values?: unknown[]) {
      const name = values === undefined ? null : nameOf(text);
      return name === null ? client.query(text, values) : client.query({ name, text, values });
    },
  };
}
