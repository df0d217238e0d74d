import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../config/config.ts';
import { base32Encode } from '../domain/totp.ts';
import { loadOrCreateAdminTotpSeed } from './admin-token.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const dataDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'hookrail-admin-'));
  dirs.push(d);
  return d;
};

describe("the operator's step-up seed", () => {
  it('is made once in the data directory (0600), then read back', () => {
    const dir = dataDir();
    const first = loadOrCreateAdminTotpSeed({ env: null, dataDir: dir });
    expect(first.created).toBe(true);
    expect(first.seed).toHaveLength(20);
    const file = join(dir, 'admin-totp-seed');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').trim()).toBe(base32Encode(first.seed));
    const again = loadOrCreateAdminTotpSeed({ env: null, dataDir: dir });
    expect(again).toEqual({ seed: first.seed, created: false });
  });

  it('HOOKRAIL_ADMIN_TOTP_SEED wins, as an authenticator shows it (any case, spaces, no padding)', () => {
    const seed = Buffer.alloc(20, 3);
    const shown = base32Encode(seed, { padding: false })
      .toLowerCase()
      .replace(/(.{4})/g, '$1 ');
    const dir = dataDir();
    expect(loadOrCreateAdminTotpSeed({ env: shown, dataDir: dir })).toEqual({ seed, created: false });
    expect(() => statSync(join(dir, 'admin-totp-seed'))).toThrow(/ENOENT/);
  });

  it('a seed that is not base32, or too short to be one, is a configuration error naming the setting', () => {
    for (const env of ['not-base32!', base32Encode(Buffer.alloc(10, 1))]) {
      expect(() => loadOrCreateAdminTotpSeed({ env, dataDir: dataDir() })).toThrow(ConfigError);
      expect(() => loadOrCreateAdminTotpSeed({ env, dataDir: dataDir() })).toThrow(
        /HOOKRAIL_ADMIN_TOTP_SEED/,
      );
    }
  });
});
