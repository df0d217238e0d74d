/**
 * The CLI's tool commands (everything but `start` and `migrate`, which main.ts runs): what each is called, and how
 * a failure is reported. Tests run these in-process with a CliIo of their own.
 */

import { ApiFailure } from './api-client.ts';
import {
  API_USAGE,
  endpointsCommand,
  eventsCommand,
  producerKeysCommand,
  replayCommand,
  tenantsCommand,
} from './api-commands.ts';
import { CliFailure, type CliIo, CliUsageError } from './io.ts';
import { queueCommand } from './queue.ts';
import { verifyCommand } from './verify.ts';

export const TOOL_COMMANDS: Record<string, (args: string[], io: CliIo) => Promise<number>> = {
  tenants: tenantsCommand,
  'producer-keys': producerKeysCommand,
  endpoints: endpointsCommand,
  events: eventsCommand,
  replay: replayCommand,
  verify: verifyCommand,
  queue: queueCommand,
};

export const TOOL_USAGE = `${API_USAGE}
  hookrail verify --secret <whsec_…> (--id <webhook-id> --timestamp <s> --signature <value> | --headers <file>)
                  --body <file|->                                  (is a received webhook signed by Hookrail?)
  hookrail queue rebuild [--dry-run] [--deliveries [--since <ISO time>]] [--database-url postgres://…]
                         [--data-dir ./data]        (repair queue state; with --deliveries lost delivery rows first)`;

/** Runs one tool command; a refusal or mistake becomes `error: …` on stderr and exit code 1 (2 for usage). */
export async function runTool(command: string, args: string[], io: CliIo): Promise<number> {
  const run = TOOL_COMMANDS[command];
  if (!run) throw new CliUsageError(`unknown command "${command}"`);
  try {
    return await run(args, io);
  } catch (err) {
    if (err instanceof CliUsageError) {
      io.err(`error: ${err.message}\n`);
      return 2;
    }
    if (err instanceof CliFailure) {
      io.err(`error: ${err.message}\n`);
      if (err instanceof ApiFailure && err.details !== undefined && err.details !== null) {
        io.err(`${JSON.stringify(err.details, null, 2)}\n`);
      }
      return 1;
    }
    throw err;
  }
}
