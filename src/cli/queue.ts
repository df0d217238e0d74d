/**
 * `hookrail queue rebuild`: an operator's repair of the per-endpoint queue state (app/queue-rebuild.ts) after a
 * restore from backup, manual SQL or a bug. It opens the store from the same configuration as `hookrail migrate`
 * (flags, then the environment) and is safe to run while Hookrail runs.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { systemClock } from '../adapters/system-clock.ts';
import { LISTED_CHANGES, type QueueRebuildReport, rebuildQueues } from '../app/queue-rebuild.ts';
import { createStore } from '../bootstrap/create-store.ts';
import { ConfigError, flagsToEnv, loadConfig } from '../config/config.ts';
import { CliFailure, type CliIo, CliUsageError } from './io.ts';

const HELP = `Usage:
  hookrail queue rebuild [--dry-run] [--database-url postgres://…] [--data-dir ./data]

Recomputes every endpoint's queue state from its deliveries: the in-flight count (deliveries leased and not yet
completed) and the next due time (the earliest unleased pending delivery), and recreates a missing queue row.
One short transaction per endpoint, so it is safe while Hookrail runs. Use it after restoring a backup, after
editing the database by hand, or when an endpoint's deliveries stay pending although it is enabled and healthy.

  --dry-run            report what differs, change nothing
  --database-url       PostgreSQL (default: DATABASE_URL; without either, SQLite in the data directory)
  --data-dir           the SQLite data directory (default: HOOKRAIL_DATA_DIR, else ./data)

Prints one JSON document: {"dry_run":…,"endpoints":N,"fixed":M,"changes":[{"endpoint_id":…,"created":…,
"inflight":[stored,rebuilt],"next_due_at":[stored,rebuilt]}…],"changes_omitted":K} (the first ${LISTED_CHANGES}
changes are listed). Progress goes to standard error on a terminal.
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
  let drawnAt: number | null = null;
  const progress = (done: number, total: number) => {
    if (!io.interactive) return;
    const t = Date.now();
    if (drawnAt !== null && t - drawnAt < REDRAW_MS && done < total) return;
    drawnAt = t;
    io.err(`\rrebuilding: ${done}/${total} endpoints`);
  };
  let report: QueueRebuildReport;
  try {
    report = await rebuildQueues(
      { store, clock: systemClock },
      { dryRun: values['dry-run'] === true, sharedLanes: config.sharedLanes, onProgress: progress },
    );
  } finally {
    if (drawnAt !== null) io.err('\n');
    await store.close();
  }
  io.out(`${JSON.stringify(toJson(report), null, 2)}\n`);
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
        'database-url': { type: 'string' },
        'data-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new CliUsageError(`${(err as Error).message} (see hookrail queue rebuild --help)`);
  }
}

function toJson(r: QueueRebuildReport) {
  return {
    dry_run: r.dryRun,
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
