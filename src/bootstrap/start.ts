/**
 * The composition root: the one place that picks adapters from configuration and wires use cases, workers and
 * the HTTP API together for the roles this process runs.
 */
import { mkdirSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import {
  createLocalKeyService,
  loadOrCreateMasterKey,
  MASTER_KEY_FILE,
} from '../adapters/crypto/envelope.ts';
import { createPromMetrics } from '../adapters/metrics/prom-metrics.ts';
import { claimSqliteStore } from '../adapters/sqlite/owner-lock.ts';
import { createWriteLock, type WriteLock } from '../adapters/sqlite/write-lock.ts';
import { systemClock, systemRandom } from '../adapters/system-clock.ts';
import { buildApi } from '../api/build-api.ts';
import { Authenticator } from '../app/auth.ts';
import { EndpointStatsCache } from '../app/endpoint-stats-cache.ts';
import { GroupCommitter } from '../app/group-commit.ts';
import { totpAad } from '../app/manage-tenants.ts';
import { TenantDirectory } from '../app/tenant-directory.ts';
import { type Config, ConfigError, ROLES, type Role } from '../config/config.ts';
import { IDEMPOTENCY_WINDOW_MS } from '../domain/event-rules.ts';
import { ATTEMPT_TIMEOUT_MS } from '../domain/retry-schedule.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { DestinationChecker, HttpSender } from '../ports/http-sender.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { Store } from '../ports/store.ts';
import type { Tracing } from '../ports/tracing.ts';
import { loadOrCreateAdminToken, loadOrCreateAdminTotpSeed } from './admin-token.ts';
import { createDestinationChecker, createSender } from './create-sender.ts';
import { createStore, sqliteFile } from './create-store.ts';
import { createTracing } from './create-tracing.ts';
import { PIPELINE_ROLES, type PipelineThread, startPipelineThread } from './pipeline-thread.ts';
import { VERSION } from './version.ts';
import { createWorkers, type Workers } from './workers.ts';

export interface Hookrail {
  app: FastifyInstance | null;
  store: Store;
  /** Base URL when listening. */
  url: string | null;
  adminToken: string;
  workers: Workers;
  /** Delivery and maintenance run in a thread of their own (pipeline-thread.ts), not in `workers`. */
  pipelineThread: boolean;
  /** This thread's span exporter; null when no OTLP endpoint is configured (the pipeline thread has its own). */
  tracing: Tracing | null;
  /** Stop accepting, finish in-flight commits, stop workers, close the store. */
  close(): Promise<void>;
}

export interface StartOptions {
  config: Config;
  logger?: Logger | false;
  clock?: Clock;
  random?: Random;
  /** Use this store instead of the one the configuration selects (tests: a schema or file of their own). */
  store?: Store;
  /** Build the app but do not listen (tests use inject). */
  listen?: boolean;
  /** The delivery role's HTTP client; by default the guarded undici sender built from the configuration. */
  sender?: HttpSender;
  /** Registration-time URL check; by default the address guard with the system resolver. */
  destinations?: DestinationChecker;
  /** Do not start the background loops (tests drive them step by step). */
  startWorkers?: boolean;
  /**
   * The pipeline thread stopped on an error: the process should shut down (the CLI stops gracefully and
   * exits 1). Default: log it.
   */
  onFatal?: (err: unknown) => void;
  /** Called once with a generated operator token (printed by the CLI). */
  onAdminTokenCreated?: (token: string) => void;
  /** Called once with a generated operator step-up TOTP seed (printed by the CLI). */
  onAdminTotpSeedCreated?: (seed: Buffer) => void;
}

/**
 * Starts what `opts.config` says. A SQLite store that the configuration selects (no `opts.store`) is this process's
 * alone: it runs every role (nothing else could fan out or deliver what it accepts), and it is claimed for as long as
 * the process runs, so that a second process on the same data directory is refused (owner-lock.ts).
 */
export async function startHookrail(opts: StartOptions): Promise<Hookrail> {
  const { config } = opts;
  if (opts.store || config.databaseUrl) return assemble(opts);
  const missing = ROLES.filter((r) => !config.roles.includes(r));
  if (missing.length > 0) {
    throw new ConfigError(
      `with SQLite one process runs every role (missing: ${missing.join(', ')}); set DATABASE_URL to run roles ` +
        'in separate processes',
    );
  }
  mkdirSync(config.dataDir, { recursive: true });
  const owner = claimSqliteStore(sqliteFile(config.dataDir));
  try {
    const hookrail = await assemble(opts);
    const close = async () => {
      try {
        await hookrail.close();
      } finally {
        owner.release();
      }
    };
    return { ...hookrail, close };
  } catch (err) {
    owner.release();
    throw err;
  }
}

/**
 * A master key that cannot open what the store holds is refused at start: with it every signing secret fails to
 * open, and every attempt ends as a `platform_error` and then a dead letter, while the process looks healthy. It
 * happens when processes of one PostgreSQL deployment were not all given HOOKRAIL_MASTER_KEY (each then makes a
 * key file of its own) or a data directory lost its master.key. One tenant's step-up seed is the sample: every
 * value is sealed under the one master key (there is no key rotation yet).
 */
async function refuseForeignMasterKey(store: Store, keys: KeyService): Promise<void> {
  const tenant = (await store.tenantList({ limit: 1, cursor: null })).data[0];
  if (!tenant) return;
  try {
    keys.open(tenant.totpSeedSealed, totpAad(tenant.id)).fill(0);
  } catch (err) {
    throw new ConfigError(
      `the master key (HOOKRAIL_MASTER_KEY, else <data dir>/${MASTER_KEY_FILE}) cannot open the secrets this ` +
        `store holds (${(err as Error).message}): give every process the deployment's key`,
    );
  }
}

async function assemble(opts: StartOptions): Promise<Hookrail> {
  const { config } = opts;
  const logger = opts.logger ?? pino({ level: config.logLevel, redact: ['req.headers.authorization'] });
  const clock = opts.clock ?? systemClock;
  const random = opts.random ?? systemRandom;

  // The pipeline roles run in a thread of their own (pipeline-thread.ts) unless a test drives them here. The write
  // lock is SQLite's (the two connections' turn commits); a PostgreSQL store has no use for it.
  const pipelineRoles = config.roles.filter((r) => PIPELINE_ROLES.includes(r));
  const threaded =
    config.pipelineThread &&
    !opts.store &&
    !opts.sender &&
    opts.startWorkers !== false &&
    pipelineRoles.length > 0 &&
    pipelineRoles.length < config.roles.length; // else the API thread would have nothing to do
  const writeLock = threaded ? createWriteLock() : undefined;
  const store = opts.store ?? createStore(config, writeLock ? { writeLock } : {}, logger || undefined);
  try {
    return await assembleOn(opts, store, { logger, clock, random, pipelineRoles, threaded, writeLock });
  } catch (err) {
    // A start that fails closes the store it opened (on SQLite, with its checkpointer thread); a store the
    // caller gave is the caller's. It may be closed already (a pipeline thread that failed to start): no matter.
    if (!opts.store) await store.close().catch(() => {});
    throw err;
  }
}

async function assembleOn(
  opts: StartOptions,
  store: Store,
  ctx: {
    logger: Logger | false;
    clock: Clock;
    random: Random;
    pipelineRoles: Role[];
    threaded: boolean;
    writeLock: WriteLock | undefined;
  },
): Promise<Hookrail> {
  const { config } = opts;
  const { logger, clock, random, pipelineRoles, threaded, writeLock } = ctx;
  await store.migrate();
  const keys = createLocalKeyService({
    masterKey: loadOrCreateMasterKey({ env: config.masterKey ?? undefined, dataDir: config.dataDir }),
  });
  await refuseForeignMasterKey(store, keys);
  const admin = loadOrCreateAdminToken({ env: config.adminToken, dataDir: config.dataDir });
  if (admin.created) opts.onAdminTokenCreated?.(admin.token);
  // Only a process serving the control API takes operator step-ups: the others neither need a seed nor print one.
  const adminTotp = config.roles.includes('control')
    ? loadOrCreateAdminTotpSeed({ env: config.adminTotpSeed, dataDir: config.dataDir })
    : null;
  if (adminTotp?.created) opts.onAdminTotpSeedCreated?.(adminTotp.seed);

  let pipeline: PipelineThread | null = null;
  const now = () => clock.now();
  const roles = new Set(config.roles);
  // The pipeline thread builds its own sender.
  const sends = roles.has('delivery') || roles.has('replay');
  // Leases are not renewed: one shorter than an attempt can take lets the attempt be leased and sent again while
  // it still runs. Allowed (tests shorten it to see expiry), but said at start.
  if (sends && logger && config.leaseMs < 2 * ATTEMPT_TIMEOUT_MS) {
    logger.warn(
      { leaseMs: config.leaseMs, attemptTimeoutMs: ATTEMPT_TIMEOUT_MS },
      'HOOKRAIL_LEASE_MS is below twice the attempt deadline: a slow attempt may be sent again while it still runs',
    );
  }
  const sender = opts.sender ?? (sends && !threaded ? createSender(config, clock) : null);
  const tracing = await createTracing(config);
  const metrics = createPromMetrics({
    queueStats: () => store.queueStats(),
    laneStats: () => store.laneStats(),
    defaultMetrics: opts.listen !== false,
    // A pipeline thread records the attempts, on a registry of its own.
    ...(threaded ? { attemptsElsewhere: () => pipeline?.metricsText() ?? Promise.resolve('') } : {}),
  });
  const workers = createWorkers({
    metrics,
    config: threaded ? { ...config, roles: config.roles.filter((r) => !PIPELINE_ROLES.includes(r)) } : config,
    store,
    keys,
    clock,
    random,
    logger: logger || null,
    sender,
    userAgent: `Hookrail/${VERSION}`,
    tracing,
    onDeliveriesCreated: () => pipeline?.poke(),
  });
  const committer = roles.has('intake')
    ? new GroupCommitter({
        store,
        now,
        idempotencyWindowMs: IDEMPOTENCY_WINDOW_MS,
        maxBatch: config.intakeMaxBatch,
        maxInFlight: store.capabilities.multiProcess ? 4 : 1,
        tracing,
        // Both where the store shares turns: a poke while a fan-out pass runs is not kept (Signal), so the durable
        // commit pokes again; a pass that then finds nothing writes nothing and syncs nothing.
        onCommit: () => workers.eventsCommitted.poke(),
        ...(store.capabilities.sharedTurn ? { onSubmit: () => workers.eventsCommitted.poke() } : {}),
      })
    : null;

  const serves = { intake: roles.has('intake'), control: roles.has('control') };
  let app: FastifyInstance | null = null;
  let url: string | null = null;
  if (serves.intake || serves.control) {
    app = await buildApi({
      store,
      clock,
      random,
      keys,
      operatorTotpSeed: adminTotp?.seed ?? null,
      auth: new Authenticator({ store, now, operatorToken: admin.token, cacheMs: config.authCacheMs }),
      tenants: new TenantDirectory({ store, now, cacheMs: config.authCacheMs }),
      committer,
      logger,
      version: VERSION,
      serves,
      metrics,
      destinations: opts.destinations ?? createDestinationChecker(config),
      egressRangesFile: config.egressRangesFile,
      sharedLanes: config.sharedLanes,
      statsCache: new EndpointStatsCache({ leaseMs: config.leaseMs }),
    });
    if (opts.listen !== false) {
      url = await app.listen({ port: config.port, host: config.host });
    } else {
      await app.ready();
    }
  }

  // One process owns a SQLite store (startHookrail claims it): leases left in it belong to a process that is gone (a
  // crash), so they are returned at once instead of after they expire. On PostgreSQL other processes may hold live
  // leases.
  if (!store.capabilities.multiProcess && sends) {
    await store.deliveryExpireLeases({ now: Number.MAX_SAFE_INTEGER });
  }
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      // Fastify's close stops accepting and waits for in-flight requests, whose commits the committer finishes.
      if (app) await app.close();
      if (committer) await committer.drain();
      await workers.stop();
      await pipeline?.stop();
      if (sender && !opts.sender) await sender.close();
      // Last, so the spans of the commits and attempts finished above are exported with the rest.
      try {
        await tracing?.shutdown();
      } finally {
        await store.close();
      }
    })();
    return closing;
  };

  if (opts.startWorkers !== false) workers.start();
  if (threaded && writeLock) {
    try {
      pipeline = await startPipelineThread({
        config: { ...config, roles: pipelineRoles },
        lock: writeLock,
        metrics,
        logger: logger || null,
        onFatal: (err) => opts.onFatal?.(err),
      });
    } catch (err) {
      await close();
      throw err;
    }
  }

  return {
    app,
    store,
    url,
    adminToken: admin.token,
    workers,
    pipelineThread: pipeline !== null,
    tracing,
    close,
  };
}
