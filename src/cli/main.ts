/**
 * `hookrail <command>`: start | migrate, and the tools of dispatch.ts (tenants, producer-keys, endpoints, events,
 * replay, verify, queue). `start` and `migrate` flags mirror the environment variables of PRODUCT.md §1a
 * (`--port` ↔ HOOKRAIL_PORT …).
 */
import { createStore } from '../bootstrap/create-store.ts';
import { startHookrail } from '../bootstrap/start.ts';
import { VERSION } from '../bootstrap/version.ts';
import { ConfigError, flagsToEnv, loadConfig } from '../config/config.ts';
import { describeLaneBinding } from '../domain/lanes.ts';
import { base32Encode, otpauthUri } from '../domain/totp.ts';
import { runTool, TOOL_COMMANDS, TOOL_USAGE } from './dispatch.ts';
import type { CliIo } from './io.ts';

const USAGE = `hookrail ${VERSION}

Usage:
  hookrail start [--roles intake,control,fanout,delivery,replay,maintenance] [--port 8080] [--host 127.0.0.1]
                 [--data-dir ./data] [--database-url postgres://…] [--log-level info]
                 [--lanes *|shared|shared:0-3,shared:7|dedicated]   (the lanes this delivery role serves)
  hookrail migrate [--database-url postgres://…] [--data-dir ./data]
${TOOL_USAGE}
  hookrail --version

Without DATABASE_URL, Hookrail stores everything in SQLite at <data-dir>/hookrail.db.
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--version' || command === 'version') {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return command ? 0 : 2;
  }
  if (command in TOOL_COMMANDS) return runTool(command, rest, processIo());
  const config = loadConfig({ ...process.env, ...flagsToEnv(rest) });

  if (command === 'migrate') {
    const store = createStore(config);
    await store.migrate();
    await store.close();
    process.stdout.write(`migrated (${store.capabilities.kind})\n`);
    return 0;
  }

  if (command === 'start') {
    let exitCode = 0;
    let stopOnFatal: ((reason: string) => void) | null = null;
    const hookrail = await startHookrail({
      config,
      onFatal: (err) => {
        process.stderr.write(`error: ${String(err)}; stopping\n`);
        exitCode = 1;
        stopOnFatal?.('pipeline thread failed');
      },
      onAdminTokenCreated: (token) =>
        process.stdout.write(
          `\nOperator token (shown once; also stored in ${config.dataDir}/admin-token):\n\n  ${token}\n\n`,
        ),
      onAdminTotpSeedCreated: (seed) =>
        process.stdout.write(
          `Operator step-up seed, for deleting tenants (shown once; also stored in ${config.dataDir}/` +
            `admin-totp-seed): enrol it in an authenticator app\n\n  ${base32Encode(seed, { padding: false })}\n` +
            `  ${otpauthUri('Hookrail:operator', seed)}\n\n`,
        ),
    });
    process.stdout.write(
      `hookrail ${VERSION} ${hookrail.url ? `listening on ${hookrail.url}` : 'running'} ` +
        `(store: ${hookrail.store.capabilities.kind}; roles: ${config.roles.join(',')}` +
        `${config.roles.includes('delivery') ? `; lanes: ${describeLaneBinding(config.lanes)}` : ''}` +
        `${hookrail.pipelineThread ? '; pipeline thread' : ''})\n`,
    );
    await new Promise<void>((resolve) => {
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        process.stdout.write(`${signal}: stopping (finishing in-flight work)\n`);
        hookrail.close().then(resolve, (err) => {
          // Not a clean stop (an in-flight commit or attempt may not have been recorded): a supervisor should know.
          process.stderr.write(`error while stopping: ${String(err)}\n`);
          exitCode = 1;
          resolve();
        });
      };
      stopOnFatal = stop;
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
    return exitCode;
  }

  process.stderr.write(`unknown command "${command}"\n\n${USAGE}`);
  return 2;
}

/** The terminal: progress and prompts only when both standard error and standard input are one. */
function processIo(): CliIo {
  const interactive = Boolean(process.stderr.isTTY && process.stdin.isTTY);
  return {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    env: process.env,
    interactive,
    async confirm(question) {
      const { createInterface } = await import('node:readline/promises');
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      try {
        return /^y(es)?$/i.test((await rl.question(`${question} [y/N] `)).trim());
      } finally {
        rl.close();
      }
    },
    async readStdin() {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    },
  };
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(
      `${err instanceof ConfigError ? 'configuration error' : 'error'}: ${err.message ?? err}\n`,
    );
    process.exit(1);
  },
);
