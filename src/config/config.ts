/**
 * Every setting with its default, read from the environment; `hookrail start` flags override the environment.
 * PRODUCT.md §1a is the contract for the names.
 */
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import {
  DEFAULT_LANE_THRESHOLDS,
  DEFAULT_SHARED_LANES,
  type LaneBinding,
  LaneError,
  type LaneThresholds,
  MAX_SHARED_LANES,
  parseLaneBinding,
  validateThresholds,
} from '../domain/lanes.ts';
import { DEFAULT_RETENTION, type RetentionDays } from '../domain/retention.ts';

/** HOOKRAIL_LEASE_MS's default: how long a leased delivery is its worker's before it is handed out again. */
export const DEFAULT_LEASE_MS = 60_000;

export const ROLES = ['intake', 'control', 'fanout', 'delivery', 'replay', 'maintenance'] as const;
export type Role = (typeof ROLES)[number];

/** The egress ranges shipped with Hookrail: an example with documentation addresses (docs/security.md). */
export const DEFAULT_EGRESS_RANGES_FILE = resolve(import.meta.dirname, '../../egress-ranges.json');

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | null;
  adminToken: string | null;
  /** The operator's step-up TOTP seed, base32 (HOOKRAIL_ADMIN_TOTP_SEED); null: the data directory's file. */
  adminTotpSeed: string | null;
  masterKey: string | null;
  allowNetworks: string[];
  /** Public ranges delivery may not reach all the same: this deployment's own ingress and egress addresses. */
  denyNetworks: string[];
  smtpUrl: string | null;
  mailFrom: string;
  egressSourceAddress: string | null;
  /** The published egress ranges served at GET /v1/egress-ranges (ADR-11); read and validated at startup. */
  egressRangesFile: string;
  logLevel: string;
  roles: Role[];
  /** How long a positive API-key / tenant lookup is cached in this process (revocation delay bound). */
  authCacheMs: number;
  /** Largest group-commit batch handed to the store in one transaction. */
  intakeMaxBatch: number;
  /** Attempts one delivery process keeps in flight (they are mostly waiting on the network). */
  deliveryConcurrency: number;
  /** Replays in flight per process with the replay role: their own budget beside deliveryConcurrency (ADR-10). */
  replayConcurrency: number;
  /** How often idle loops look for work written by other processes. */
  pollMs: number;
  /** Lease on a delivery being attempted; a crashed worker's deliveries return to the queue after it. */
  leaseMs: number;
  /** How long decrypted signing secrets are cached per process. */
  secretCacheMs: number;
  /** How often the maintenance role runs its passes (leases, auto-disable, digests, the mail outbox). */
  maintenanceMs: number;
  /** Deliver only to https:// URLs. */
  httpsOnly: boolean;
  /** Run delivery and maintenance in a thread of their own (bootstrap/pipeline-thread.ts), on either store. */
  pipelineThread: boolean;
  /** The lanes this process's delivery role leases from (`--lanes`); null: every lane. */
  lanes: LaneBinding | null;
  /** Shared lanes endpoints are hashed onto (scheme v1, domain/lanes.ts); the same in every process. */
  sharedLanes: number;
  /** When the maintenance role promotes an endpoint to a dedicated lane and demotes it again. */
  laneThresholds: LaneThresholds;
  /** How long the maintenance role keeps events, dead letters, attempts and audit records (domain/retention.ts). */
  retention: RetentionDays;
  /**
   * Where spans are exported (OTLP over HTTP), from the standard OpenTelemetry variables; null: no tracing, and
   * the OpenTelemetry SDK is not even loaded.
   */
  otlpTracesEndpoint: string | null;
  /** The spans' `service.name` (`OTEL_SERVICE_NAME`). */
  otelServiceName: string;
}

export class ConfigError extends Error {}

function parseRoles(value: string): Role[] {
  const roles = value
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  for (const r of roles) {
    if (!(ROLES as readonly string[]).includes(r)) {
      throw new ConfigError(`unknown role "${r}"; roles are ${ROLES.join(', ')}`);
    }
  }
  if (roles.length === 0) throw new ConfigError('--roles needs at least one role');
  return [...new Set(roles)] as Role[];
}

/** An integer setting within [min, max]; anything else is a configuration error, never NaN at run time. */
function parseInteger(name: string, value: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max} (got "${value}")`);
  }
  return n;
}

function parseBoolean(name: string, value: string): boolean {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new ConfigError(`${name} must be true or false (got "${value}")`);
}

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new ConfigError(`invalid port "${value}"`);
  return n;
}

const FLAG_TO_ENV: Record<string, string> = {
  port: 'HOOKRAIL_PORT',
  host: 'HOOKRAIL_HOST',
  'data-dir': 'HOOKRAIL_DATA_DIR',
  'database-url': 'DATABASE_URL',
  'admin-token': 'HOOKRAIL_ADMIN_TOKEN',
  'master-key': 'HOOKRAIL_MASTER_KEY',
  'allow-networks': 'HOOKRAIL_ALLOW_NETWORKS',
  'deny-networks': 'HOOKRAIL_DENY_NETWORKS',
  'smtp-url': 'HOOKRAIL_SMTP_URL',
  'mail-from': 'HOOKRAIL_MAIL_FROM',
  'egress-source-address': 'HOOKRAIL_EGRESS_SOURCE_ADDRESS',
  'egress-ranges-file': 'HOOKRAIL_EGRESS_RANGES_FILE',
  'log-level': 'HOOKRAIL_LOG_LEVEL',
  roles: 'HOOKRAIL_ROLES',
  lanes: 'HOOKRAIL_LANES',
};

/** `--port 9000` / `--port=9000` flags, mapped onto their environment names. */
export function flagsToEnv(args: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument "${arg}"`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const env = FLAG_TO_ENV[name];
    if (!env) throw new ConfigError(`unknown flag --${name}`);
    const value = eq === -1 ? args[++i] : arg.slice(eq + 1);
    if (value === undefined) throw new ConfigError(`--${name} needs a value`);
    out[env] = value;
  }
  return out;
}

export function loadConfig(env: Record<string, string | undefined>): Config {
  const get = (k: string) => {
    const v = env[k];
    return v === undefined || v === '' ? null : v;
  };
  const databaseUrl = get('DATABASE_URL');
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// URL (leave it unset for SQLite)');
  }
  const egress = get('HOOKRAIL_EGRESS_SOURCE_ADDRESS');
  if (egress && isIP(egress) === 0)
    throw new ConfigError('HOOKRAIL_EGRESS_SOURCE_ADDRESS must be an IP address');
  return {
    port: parsePort(get('HOOKRAIL_PORT') ?? '8080'),
    host: get('HOOKRAIL_HOST') ?? '127.0.0.1',
    dataDir: resolve(get('HOOKRAIL_DATA_DIR') ?? './data'),
    databaseUrl,
    adminToken: get('HOOKRAIL_ADMIN_TOKEN'),
    adminTotpSeed: get('HOOKRAIL_ADMIN_TOTP_SEED'),
    masterKey: get('HOOKRAIL_MASTER_KEY'),
    allowNetworks: (get('HOOKRAIL_ALLOW_NETWORKS') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    denyNetworks: (get('HOOKRAIL_DENY_NETWORKS') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    smtpUrl: get('HOOKRAIL_SMTP_URL'),
    mailFrom: get('HOOKRAIL_MAIL_FROM') ?? 'hookrail@localhost',
    egressSourceAddress: egress,
    egressRangesFile: resolve(get('HOOKRAIL_EGRESS_RANGES_FILE') ?? DEFAULT_EGRESS_RANGES_FILE),
    logLevel: get('HOOKRAIL_LOG_LEVEL') ?? 'info',
    roles: parseRoles(get('HOOKRAIL_ROLES') ?? ROLES.join(',')),
    authCacheMs: parseInteger(
      'HOOKRAIL_AUTH_CACHE_MS',
      get('HOOKRAIL_AUTH_CACHE_MS') ?? '5000',
      0,
      3_600_000,
    ),
    intakeMaxBatch: parseInteger(
      'HOOKRAIL_INTAKE_MAX_BATCH',
      get('HOOKRAIL_INTAKE_MAX_BATCH') ?? '512',
      1,
      10_000,
    ),
    // 512: more room before slow endpoints (each within its own cap) take every slot; measured in bench:delivery
    // (SQLite, 4 alternated pairs) 3,361 against 3,059 attempts/s on average with 256 (docs/benchmarks-delivery-log.md,
    // ninth round).
    deliveryConcurrency: parseInteger(
      'HOOKRAIL_DELIVERY_CONCURRENCY',
      get('HOOKRAIL_DELIVERY_CONCURRENCY') ?? '512',
      1,
      100_000,
    ),
    replayConcurrency: parseInteger(
      'HOOKRAIL_REPLAY_CONCURRENCY',
      get('HOOKRAIL_REPLAY_CONCURRENCY') ?? '64',
      1,
      100_000,
    ),
    pollMs: parseInteger('HOOKRAIL_POLL_MS', get('HOOKRAIL_POLL_MS') ?? '100', 1, 60_000),
    leaseMs: parseInteger(
      'HOOKRAIL_LEASE_MS',
      get('HOOKRAIL_LEASE_MS') ?? String(DEFAULT_LEASE_MS),
      1000,
      3_600_000,
    ),
    secretCacheMs: parseInteger(
      'HOOKRAIL_SECRET_CACHE_MS',
      get('HOOKRAIL_SECRET_CACHE_MS') ?? '5000',
      0,
      3_600_000,
    ),
    maintenanceMs: parseInteger(
      'HOOKRAIL_MAINTENANCE_MS',
      get('HOOKRAIL_MAINTENANCE_MS') ?? '5000',
      10,
      86_400_000,
    ),
    httpsOnly: parseBoolean('HOOKRAIL_HTTPS_ONLY', get('HOOKRAIL_HTTPS_ONLY') ?? 'false'),
    pipelineThread: parseBoolean('HOOKRAIL_PIPELINE_THREAD', get('HOOKRAIL_PIPELINE_THREAD') ?? 'true'),
    ...loadLaneConfig(get),
    retention: loadRetention(get),
    otlpTracesEndpoint: loadTracesEndpoint(get),
    otelServiceName: get('OTEL_SERVICE_NAME') ?? 'hookrail',
  };
}

/**
 * The OTLP/HTTP traces URL, as the OpenTelemetry specification derives it: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
 * as given, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`. Read here rather than left to the exporter because
 * whether it is set decides whether the SDK is loaded at all, and because tests and `hookrail start` flags pass
 * their own environment. The exporter reads the other `OTEL_EXPORTER_OTLP_*` variables (headers, timeout,
 * compression, certificates) from the process environment itself. It sends OTLP over HTTP as JSON whatever the
 * protocol variable says (collectors take both encodings on the same path), so only `grpc` is refused, rather
 * than exporting to a gRPC port that would never answer.
 */
function loadTracesEndpoint(get: (k: string) => string | null): string | null {
  if (get('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return null;
  const exporter = get('OTEL_TRACES_EXPORTER')?.trim().toLowerCase() ?? 'otlp';
  if (exporter === 'none') return null;
  if (exporter !== 'otlp') throw new ConfigError('OTEL_TRACES_EXPORTER must be otlp or none');
  const protocol = get('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? get('OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol === 'grpc')
    throw new ConfigError('OTLP over gRPC is not supported: Hookrail exports OTLP over HTTP (JSON)');
  const specific = get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = get('OTEL_EXPORTER_OTLP_ENDPOINT');
  const url = specific ?? (base === null ? null : `${base}${base.endsWith('/') ? '' : '/'}v1/traces`);
  if (url === null) return null;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`the OTLP traces endpoint must be an http(s) URL (got "${url}")`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new ConfigError(`the OTLP traces endpoint must be an http(s) URL (got "${url}")`);
  return url;
}

/**
 * Retention in days. Events are kept at least 2 days, longer than the idempotency window (24 h), so a repeated
 * request never finds its key pointing at a deleted event.
 */
function loadRetention(get: (k: string) => string | null): RetentionDays {
  const d = DEFAULT_RETENTION;
  const days = (name: string, fallback: number, min: number) =>
    parseInteger(name, get(name) ?? String(fallback), min, 36_500);
  return {
    eventsDays: days('HOOKRAIL_RETENTION_EVENTS_DAYS', d.eventsDays, 2),
    deadLettersDays: days('HOOKRAIL_RETENTION_DEAD_LETTERS_DAYS', d.deadLettersDays, 1),
    attemptsDays: days('HOOKRAIL_RETENTION_ATTEMPTS_DAYS', d.attemptsDays, 1),
    auditDays: days('HOOKRAIL_RETENTION_AUDIT_DAYS', d.auditDays, 1),
  };
}

function loadLaneConfig(get: (k: string) => string | null) {
  const sharedLanes = parseInteger(
    'HOOKRAIL_SHARED_LANES',
    get('HOOKRAIL_SHARED_LANES') ?? String(DEFAULT_SHARED_LANES),
    1,
    MAX_SHARED_LANES,
  );
  const d = DEFAULT_LANE_THRESHOLDS;
  const int = (name: string, fallback: number) => parseInteger(name, get(name) ?? String(fallback), 0);
  const laneThresholds: LaneThresholds = {
    promoteBacklog: int('HOOKRAIL_LANE_PROMOTE_BACKLOG', d.promoteBacklog),
    promoteRatePerMin: int('HOOKRAIL_LANE_PROMOTE_RATE', d.promoteRatePerMin),
    demoteBacklog: int('HOOKRAIL_LANE_DEMOTE_BACKLOG', d.demoteBacklog),
    demoteRatePerMin: int('HOOKRAIL_LANE_DEMOTE_RATE', d.demoteRatePerMin),
    minDwellMs: int('HOOKRAIL_LANE_MIN_DWELL_MS', d.minDwellMs),
  };
  const asConfigError = <T>(name: string, fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      throw err instanceof LaneError ? new ConfigError(`${name}: ${err.message}`) : err;
    }
  };
  asConfigError('HOOKRAIL_LANE_* thresholds', () => validateThresholds(laneThresholds));
  const lanes = asConfigError('HOOKRAIL_LANES', () =>
    parseLaneBinding(get('HOOKRAIL_LANES') ?? '*', sharedLanes),
  );
  return { sharedLanes, laneThresholds, lanes };
}
