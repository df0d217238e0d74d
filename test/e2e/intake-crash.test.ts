/**
 * PRODUCT.md §6: "An event answered 202 is … never lost — including across `kill -9` of any process at any moment."
 *
 * Hookrail (roles intake,control) runs as a child process under concurrent POST /v1/events load and is SIGKILLed at a
 * random moment 200–800 ms into the load, then restarted on the same data directory (SQLite) or schema (PostgreSQL).
 * Every event that was answered 202 — in this round or any earlier one — must be readable, intact, after each
 * restart. Requests that were in flight when the process died must have failed with a connection error (never some
 * other answer), and no request started after the kill may have been answered at all.
 */
import { describe, expect, it } from 'vitest';
import { ROLES } from '../../src/config/config.ts';
import {
  createChildSchema,
  type RunningHookrail,
  spawnHookrail,
  tempDir,
  useCleanups,
  useHookrailProcesses,
} from '../support/hookrail-process.ts';
import {
  findUnreadable,
  isConnectionError,
  runLoad,
  type SendRecord,
  setupTenant,
  sleep,
  tally,
} from '../support/intake-load.ts';
import { postgresUrl } from '../support/postgres.ts';

useHookrailProcesses();

const ADMIN_TOKEN = 'hka_e2e_crash_operator_token';
const SENDERS = 32;
const ROUNDS = 3;

const cleanups = useCleanups();

/** Three kill points, one from each third of 200–800 ms, in a random order. */
function killPoints(): number[] {
  const points = [0, 1, 2].map((i) => Math.round(200 + i * 200 + Math.random() * 200));
  return points.sort(() => Math.random() - 0.5);
}

describe.each(['sqlite', 'postgres'] as const)('kill -9 during intake load (%s)', (kind) => {
  it(`every 202 survives ${ROUNDS} SIGKILLs at random moments`, { timeout: 60_000 }, async () => {
    const env: Record<string, string> = {
      // SQLite: one process with every role (startHookrail refuses fewer); no endpoint, so nothing is sent.
      HOOKRAIL_ROLES: kind === 'sqlite' ? ROLES.join(',') : 'intake,control',
      HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
      HOOKRAIL_DATA_DIR: tempDir(cleanups, 'crash'),
    };
    if (kind === 'postgres') {
      const pgSchema = await createChildSchema(postgresUrl(), 'crash');
      cleanups.push(pgSchema.drop);
      env.DATABASE_URL = pgSchema.url;
    }

    let proc: RunningHookrail = await spawnHookrail({ env, name: `${kind}#0` });
    const { tenantId, producerKey } = await setupTenant(proc.url, ADMIN_TOKEN);
    const accepted: SendRecord[] = [];
    const report: string[] = [];

    for (const [round, killAfterMs] of killPoints().entries()) {
      const stop = new AbortController();
      const loadStarted = performance.now();
      // The kill point counts from the first 202, not from the start: on a loaded machine the first answers can
      // take longer than the earliest kill point, and a kill before anything was accepted proves nothing.
      let firstAccepted: () => void = () => {};
      const accepting = new Promise<void>((resolve) => {
        firstAccepted = resolve;
      });
      const load = runLoad({
        onRecord: (r) => {
          if (r.status === 202) firstAccepted();
        },
        targets: [proc.url],
        producerKey,
        tenantId,
        concurrency: SENDERS,
        run: `${kind}-round-${round}`,
        signal: stop.signal,
        stopSenderOnConnectionError: true,
      });
      await Promise.race([accepting, sleep(10_000)]);
      await sleep(killAfterMs);
      const killedAt = performance.now();
      const exit = await proc.kill('SIGKILL');
      stop.abort();
      const records = await load;

      // It really died of the SIGKILL, mid-load.
      expect(exit.signal, proc.output()).toBe('SIGKILL');

      const ok = records.filter((r) => r.status === 202);
      const inFlight = records.filter((r) => r.startedAt < killedAt && r.endedAt >= killedAt);
      const inFlightErrors = inFlight.filter((r) => r.errorCode !== null);
      const startedAfterKill = records.filter((r) => r.startedAt >= killedAt);
      // Every request ended in a 202 or a connection error: no 5xx, no timeout, no half answer.
      const odd = records.filter(
        (r) => r.status !== 202 && !(r.errorCode !== null && isConnectionError(r.errorCode)),
      );
      expect(odd.map((r) => ({ status: r.status, error: r.errorCode, body: r.body }))).toEqual([]);
      expect(ok.length).toBeGreaterThan(0);
      // The process died mid-load: requests in flight at the kill were cut off, or (when the kill fell just after a
      // group commit had answered every request in flight, their 202s still on the wire) the next ones failed.
      expect(inFlightErrors.length + startedAfterKill.length).toBeGreaterThan(0);
      // A dead process answers nothing: every request started after the kill failed to connect.
      expect(startedAfterKill.filter((r) => r.errorCode === null)).toEqual([]);
      for (const r of ok) expect(r.eventId).toMatch(/^evt_/);

      accepted.push(...ok);
      report.push(
        `round ${round}: killed at ${Math.round(killedAt - loadStarted)} ms (${killAfterMs} ms after the first 202); ` +
          `${ok.length} x 202; in flight at the kill: ${inFlight.length} ` +
          `(${inFlightErrors.length} connection errors, ${inFlight.length - inFlightErrors.length} x 202 already ` +
          `on the wire); started after the kill: ${startedAfterKill.length}; outcomes ${JSON.stringify(tally(records))}`,
      );

      proc = await spawnHookrail({ env, name: `${kind}#${round + 1}` });
      // Every 202 so far — this round's and the earlier rounds' — is there, as sent.
      const missing = await findUnreadable(proc.url, ADMIN_TOKEN, accepted, { tenantId });
      expect(
        missing.slice(0, 5),
        `${missing.length} of ${accepted.length} accepted events unreadable`,
      ).toEqual([]);
    }
    // No event id was handed out twice.
    expect(new Set(accepted.map((r) => r.eventId)).size).toBe(accepted.length);
    await proc.kill('SIGTERM');
    console.log(
      `[intake-crash ${kind}] ${accepted.length} events answered 202, all readable\n  ${report.join('\n  ')}`,
    );
  });
});
