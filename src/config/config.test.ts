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
      roles: ['intake', 'control', 'fanout', 'delivery', 'replay', 'maintenance'],
      leaseMs: 60_000,
      httpsOnly: false,
    });
  });

  it.each([
    ['HOOKRAIL_LEASE_MS', '2s'],
    ['HOOKRAIL_LEASE_MS', '10'],
    ['HOOKRAIL_POLL_MS', '-5'],
    ['HOOKRAIL_DELIVERY_CONCURRENCY', '0'],
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
    expect(flagsToEnv(['--port', '9000', '--roles=intake,control'])).toEqual({
      HOOKRAIL_PORT: '9000',
      HOOKRAIL_ROLES: 'intake,control',
    });
    expect(() => flagsToEnv(['--nope', '1'])).toThrow(/unknown flag/);
  });
});
