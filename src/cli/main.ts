/**
 * `hookrail <command>`: start | migrate (more commands arrive with the features they drive).
 * Flags mirror the environment variables of PRODUCT.md §1a (`--port` ↔ HOOKRAIL_PORT …).
 */
import { createStore } from '../bootstrap/create-store.ts';
import { startHookrail } from '../bootstrap/start.ts';
import { VERSION } from '../bootstrap/version.ts';
import { ConfigError, flagsToEnv, loadConfig } from '../config/config.ts';
import { describeLaneBinding } from '../domain/lanes.ts';

const USAGE = `hookrail ${VERSION}

Usage:
  hookrail start [--roles intake,control,fanout,delivery,replay,maintenance] [--port 8080] [--host 127.0.0.1]
                 [--data-dir ./data] [--database-url postgres://…] [--log-level info]
                 [--lanes *|shared|shared:0-3,shared:7|dedicated]   (the lanes this delivery role serves)
  hookrail migrate [--database-url postgres://…] [--data-dir ./data]
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
          process.stderr.write(`error while stopping: ${String(err)}\n`);
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

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(
      `${err instanceof ConfigError ? 'configuration error' : 'error'}: ${err.message ?? err}\n`,
    );
    process.exit(1);
  },
);
