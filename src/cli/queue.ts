/**
 * `hookrail queue rebuild`: an operator's repair of the per-endpoint queue state (app/queue-rebuild.ts) after a
 * restore from backup, manual SQL or a bug, and with `--deliveries` first of lost delivery rows themselves, from the
 * events and the attempt log (app/delivery-reconstruct.ts, ADR-15). It opens the store from the same configuration
 * as `hookrail migrate` (flags, then the environment) and is safe to run while Hookrail runs.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { systemClock, systemRandom } from '../adapters/system-clock.ts';
import { type DeliveryReconstructReport, reconstructDeliveries } from '../app/delivery-reconstruct.ts';
import { LISTED_CHANGES, type QueueRebuildReport, rebuildQueues } from '../app/queue-rebuild.ts';
import { createStore } from '../bootstrap/create-store.ts';
import { ConfigError, flagsToEnv, loadConfig } from '../config/config.ts';
import { CliFailure, type CliIo, CliUsageError } from './io.ts';

const HELP = `Usage:
  hookrail queue rebuild [--dry-run] [--deliveries [--since <ISO time>]] [--database-url postgres://…]
                         [--data-dir ./data]

Recomputes every endpoint's queue state from its deliveries: the in-flight count (deliveries leased and not yet
completed) and the next due time (the earliest unleased pending delivery), and recreates a missing queue row.
One short transaction per endpoint, so it is safe while Hookrail runs. Use it after restoring a backup, after
editing the database by hand, or when an endpoint's deliveries stay pending although it is enabled and healthy.

With --deliveries it first rebuilds lost delivery rows from the events and the attempt log: a delivery the log
names comes back in the state its attempts prove (delivered, dead, pending …; never sent again once delivered),
and an endpoint subscribed to an event that has neither a delivery nor an attempt for it gets a new pending one.
Subscriptions are judged as they are now, and a delivery skipped or cancelled before any attempt comes back
pending: look at --dry-run first (docs/cli.md lists every limit).

  --dry-run            report what differs, change nothing
  --deliveries         rebuild lost delivery rows first, then the queue state
  --since <ISO time>   with --deliveries: only events accepted at or after this (default, and earliest: the start
                       of the attempt log's retention, HOOKRAIL_RETENTION_ATTEMPTS_DAYS)
  --database-url       PostgreSQL (default: DATABASE_URL; without either, SQLite in the data directory)
  --data-dir           the SQLite data directory (default: HOOKRAIL_DATA_DIR, else ./data)

Prints one JSON document: {"dry_run":…,"endpoints":N,"fixed":M,"changes":[{"endpoint_id":…,"created":…,
"inflight":[stored,rebuilt],"next_due_at":[stored,rebuilt]}…],"changes_omitted":K} (the first ${LISTED_CHANGES}
changes are listed); with --deliveries also "deliveries":{"since":…,"events":N,"recreated":R,"created":C,
"endpoints":[{"endpoint_id":…,"recreated":{"delivered":…},"created":…}…],"endpoints_omitted":K}. Progress goes to
standard error on a terminal.
`;

/** How often the progress line is redrawn at most. */
const REDRAW_MS = 100;

export async function queueCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === '--help' || sub === '-h' || sub === 'help') {
    io.out(HELP);
    return 0;
  }
  if (sub === undefined) throw new CliUsageError('give a queue command: hookrail queue rebuild (see --help)');
  if (sub !== 'rebuild') throw new CliUsageError(`unknown queue command "${sub}" (there is: rebuild)`);
  const { values } = parseFlags(rest);
  if (values.help) {
    io.out(HELP);
    return 0;
  }
  if (values.since !== undefined && !values.deliveries) {
    throw new CliUsageError('--since applies to --deliveries (see hookrail queue rebuild --help)');
  }
  // An ISO time with its zone (a time without one would be read in this machine's zone), not in the future.
  const since =
    values.since === undefined
      ? null
      : /^\d{4}-\d{2}-\d{2}T[\d:.]+(Z|[+-]\d{2}:\d{2})$/.test(values.since)
        ? Date.parse(values.since)
        : Number.NaN;
  if (since !== null && (!Number.isFinite(since) || since > Date.now())) {
    throw new CliUsageError(
      `--since: not a past ISO time with a zone: ${values.since} (e.g. 2026-12-01T00:00:00Z)`,
    );
  }

  let config: ReturnType<typeof loadConfig>;
  try {
    const flags = [
      ...(values['database-url'] !== undefined ? ['--database-url', values['database-url']] : []),
      ...(values['data-dir'] !== undefined ? ['--data-dir', values['data-dir']] : []),
    ];
    config = loadConfig({ ...io.env, ...flagsToEnv(flags) });
  } catch (err) {
    if (err instanceof ConfigError) throw new CliUsageError(err.message);
    throw err;
  }
  // Opening a SQLite store creates the file: a mistyped --data-dir would leave an empty database behind.
  if (!config.databaseUrl && !existsSync(join(config.dataDir, 'hookrail.db'))) {
    throw new CliFailure(`no Hookrail database in ${config.dataDir} (give --data-dir, or --database-url)`);
  }

  const store = createStore(config);
  const dryRun = values['dry-run'] === true;
  let drawnAt: number | null = null;
  const draw = (line: string, last: boolean) => {
    if (!io.interactive) return;
    const t = Date.now();
    if (drawnAt !== null && t - drawnAt < REDRAW_MS && !last) return;
    drawnAt = t;
    io.err(`\r${line}`);
  };
  let deliveries: DeliveryReconstructReport | null = null;
  let report: QueueRebuildReport;
  try {
    if (values.deliveries) {
      deliveries = await reconstructDeliveries(
        { store, clock: systemClock, random: systemRandom },
        {
          dryRun,
          since,
          retention: config.retention,
          onProgress: (events) => draw(`reconstructing deliveries: ${events} events`, false),
        },
      );
      if (drawnAt !== null) {
        draw(`reconstructing deliveries: ${deliveries.events} events`, true);
        io.err('\n');
        drawnAt = null;
      }
      if (deliveries.sinceRaised) {
        io.err(
          `warning: --since is before the attempt log's retention (${config.retention.attemptsDays} days) or ` +
            `before attempts named their event (the upgrade): started at ${new Date(deliveries.since).toISOString()} ` +
            'instead\n',
        );
      }
    }
    report = await rebuildQueues(
      { store, clock: systemClock },
      {
        dryRun,
        sharedLanes: config.sharedLanes,
        onProgress: (done, total) => draw(`rebuilding: ${done}/${total} endpoints`, done >= total),
      },
    );
  } finally {
    if (drawnAt !== null) io.err('\n');
    await store.close();
  }
  io.out(`${JSON.stringify(toJson(report, deliveries), null, 2)}\n`);
  return 0;
}

function parseFlags(args: string[]) {
  try {
    return parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        'dry-run': { type: 'boolean' },
        deliveries: { type: 'boolean' },
        since: { type: 'string' },
        'database-url': { type: 'string' },
        'data-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new CliUsageError(`${(err as Error).message} (see hookrail queue rebuild --help)`);
  }
}

function toJson(r: QueueRebuildReport, d: DeliveryReconstructReport | null) {
  return {
    dry_run: r.dryRun,
    ...(d === null
      ? {}
      : {
          deliveries: {
            since: new Date(d.since).toISOString(),
            events: d.events,
            recreated: d.recreated,
            created: d.created,
            endpoints: d.endpoints.slice(0, LISTED_CHANGES).map((e) => ({
              endpoint_id: e.endpointId,
              recreated: e.recreated,
              created: e.created,
            })),
            endpoints_omitted: Math.max(0, d.endpoints.length - LISTED_CHANGES),
          },
        }),
    endpoints: r.endpoints,
    fixed: r.fixed,
    changes: r.changes.map((c) => ({
      endpoint_id: c.endpointId,
      created: c.created,
      inflight: c.inflight,
      next_due_at: c.nextDueAt,
    })),
    changes_omitted: r.fixed - r.changes.length,
  };
}
