import { describe, expect, it } from 'vitest';
import { ConfigError, flagsToEnv, loadConfig } from './config.ts';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      databaseUrl: null,
      allowNetworks: [],
      denyNetworks: [],
      roles: ['intake', 'control', 'fanout', 'delivery', 'replay', 'maintenance'],
      leaseMs: 60_000,
      httpsOnly: false,
      pipelineThread: true,
      lanes: null,
      sharedLanes: 8,
      laneThresholds: {
        promoteBacklog: 10_000,
        promoteRatePerMin: 30_000,
        demoteBacklog: 1_000,
        demoteRatePerMin: 10_000,
        minDwellMs: 600_000,
      },
      retention: { eventsDays: 30, deadLettersDays: 30, attemptsDays: 90, auditDays: 400 },
      otlpTracesEndpoint: null,
      otelServiceName: 'hookrail',
    });
  });

  it('exports traces when an OTLP endpoint is set, as the OpenTelemetry variables define it', () => {
    const traces = (env: Record<string, string>) => loadConfig(env).otlpTracesEndpoint;
    // The generic endpoint gets the signal's path; the traces-specific one is used as given and wins.
    expect(traces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(traces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example/base/' })).toBe(
      'https://otel.example/base/v1/traces',
    );
    expect(
      traces({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:9999/custom',
      }),
    ).toBe('http://traces:9999/custom');
    expect(traces({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toBeNull();
    // The standard switches turn it off again.
    expect(traces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(traces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
    expect(
      traces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }),
    ).toBe('http://c:4318/v1/traces');
    expect(loadConfig({ OTEL_SERVICE_NAME: 'hookrail-eu' }).otelServiceName).toBe('hookrail-eu');
    for (const env of [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' },
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'zipkin' },
    ]) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
    }
  });

  it('reads the retention windows, in days; events are kept longer than the idempotency window', () => {
    const c = loadConfig({
      HOOKRAIL_RETENTION_EVENTS_DAYS: '7',
      HOOKRAIL_RETENTION_DEAD_LETTERS_DAYS: '14',
      HOOKRAIL_RETENTION_ATTEMPTS_DAYS: '30',
      HOOKRAIL_RETENTION_AUDIT_DAYS: '365',
    });
    expect(c.retention).toEqual({ eventsDays: 7, deadLettersDays: 14, attemptsDays: 30, auditDays: 365 });
    expect(() => loadConfig({ HOOKRAIL_RETENTION_EVENTS_DAYS: '1' })).toThrow(
      /HOOKRAIL_RETENTION_EVENTS_DAYS must be an integer between 2 and 36500/,
    );
    expect(() => loadConfig({ HOOKRAIL_RETENTION_AUDIT_DAYS: '0' })).toThrow(ConfigError);
  });

  it('reads the lane binding against the shared-lane count, and the thresholds', () => {
    const c = loadConfig({
      HOOKRAIL_LANES: 'shared:0-1,dedicated',
      HOOKRAIL_SHARED_LANES: '4',
      HOOKRAIL_LANE_PROMOTE_BACKLOG: '50',
      HOOKRAIL_LANE_PROMOTE_RATE: '600',
      HOOKRAIL_LANE_DEMOTE_BACKLOG: '5',
      HOOKRAIL_LANE_DEMOTE_RATE: '60',
      HOOKRAIL_LANE_MIN_DWELL_MS: '2000',
    });
    expect(c.lanes).toEqual({ shared: [0, 1], dedicated: true });
    expect(c.sharedLanes).toBe(4);
    expect(c.laneThresholds).toEqual({
      promoteBacklog: 50,
      promoteRatePerMin: 600,
      demoteBacklog: 5,
      demoteRatePerMin: 60,
      minDwellMs: 2000,
    });
    expect(loadConfig({ HOOKRAIL_LANES: 'shared' }).lanes).toEqual({ shared: 'all', dedicated: false });
  });

  it.each<[Record<string, string>, RegExp]>([
    [{ HOOKRAIL_LANES: 'fast' }, /HOOKRAIL_LANES: unknown lane "fast"/],
    [{ HOOKRAIL_LANES: 'shared:8' }, /HOOKRAIL_LANES: .*8 shared lanes/],
    [{ HOOKRAIL_LANES: 'shared:5', HOOKRAIL_SHARED_LANES: '4' }, /4 shared lanes/],
    [{ HOOKRAIL_SHARED_LANES: '0' }, /HOOKRAIL_SHARED_LANES must be an integer between 1 and 1024/],
    [{ HOOKRAIL_LANE_PROMOTE_BACKLOG: 'many' }, /HOOKRAIL_LANE_PROMOTE_BACKLOG must be an integer/],
    [
      { HOOKRAIL_LANE_DEMOTE_BACKLOG: '20000' },
      /thresholds: the demote backlog must be below the promote backlog/,
    ],
    [{ HOOKRAIL_LANE_DEMOTE_RATE: '30000' }, /the demote rate must be below the promote rate/],
    [{ HOOKRAIL_LANE_MIN_DWELL_MS: '-1' }, /HOOKRAIL_LANE_MIN_DWELL_MS/],
  ])('refuses lane settings %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it.each([
    ['HOOKRAIL_LEASE_MS', '2s'],
    ['HOOKRAIL_LEASE_MS', '10'],
    ['HOOKRAIL_POLL_MS', '-5'],
    ['HOOKRAIL_DELIVERY_CONCURRENCY', '0'],
    ['HOOKRAIL_REPLAY_CONCURRENCY', '0'],
    ['HOOKRAIL_MAINTENANCE_MS', '1.5'],
    ['HOOKRAIL_AUTH_CACHE_MS', 'soon'],
    ['HOOKRAIL_HTTPS_ONLY', 'yes'],
    ['HOOKRAIL_PORT', '70000'],
    ['DATABASE_URL', 'mysql://x'],
    ['HOOKRAIL_ROLES', 'intake,teleport'],
    ['HOOKRAIL_EGRESS_SOURCE_ADDRESS', 'not-an-ip'],
  ])('refuses %s=%s with a clear message', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name === 'HOOKRAIL_PORT' ? /port/ : /./);
  });

  it('maps flags onto their environment names', () => {
    expect(flagsToEnv(['--port', '9000', '--roles=intake,control', '--lanes', 'shared:0-3'])).toEqual({
      HOOKRAIL_PORT: '9000',
      HOOKRAIL_ROLES: 'intake,control',
      HOOKRAIL_LANES: 'shared:0-3',
    });
    expect(() => flagsToEnv(['--nope', '1'])).toThrow(/unknown flag/);
    expect(flagsToEnv(['--deny-networks', '203.0.113.7/32'])).toEqual({
      HOOKRAIL_DENY_NETWORKS: '203.0.113.7/32',
    });
    expect(loadConfig({ HOOKRAIL_DENY_NETWORKS: ' 198.51.100.0/24, 2001:db8::1 ' }).denyNetworks).toEqual([
      '198.51.100.0/24',
      '2001:db8::1',
    ]);
  });
});
