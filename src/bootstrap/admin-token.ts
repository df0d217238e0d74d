/**
 * The operator's credentials, each from the environment when set, else generated at first start, stored (0600) in
 * the data directory, and reported as `created` so the caller prints it once:
 * - the operator token: HOOKRAIL_ADMIN_TOKEN, else `<data dir>/admin-token`;
 * - the operator's step-up TOTP seed (PRODUCT.md §3: deleting a tenant is an elevated action):
 *   HOOKRAIL_ADMIN_TOTP_SEED (base32, as authenticator apps show it), else `<data dir>/admin-totp-seed`.
 * Every process of a deployment must be given the same ones (the environment, or a shared data directory).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../config/config.ts';
import { base32Decode, base32Encode } from '../domain/totp.ts';

/** The file's content (trimmed), or `make()`'s written with O_EXCL: of two processes starting at once, one wins. */
function loadOrCreateFile(
  dataDir: string,
  name: string,
  make: () => string,
): { text: string; created: boolean } {
  const file = join(dataDir, name);
  try {
    return { text: readFileSync(file, 'utf8').trim(), created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(dataDir, { recursive: true });
  const text = make();
  try {
    writeFileSync(file, `${text}\n`, { mode: 0o600, flag: 'wx' });
    return { text, created: true };
  } catch (err) {
    // Another process created it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      return { text: readFileSync(file, 'utf8').trim(), created: false };
    }
    throw err;
  }
}

export function loadOrCreateAdminToken(opts: { env: string | null; dataDir: string }): {
  token: string;
  created: boolean;
} {
  if (opts.env) return { token: opts.env, created: false };
  const { text, created } = loadOrCreateFile(
    opts.dataDir,
    'admin-token',
    () => `hka_${randomBytes(32).toString('base64url')}`,
  );
  return { token: text, created };
}

/** 20 bytes, as for a tenant's seed (RFC 4226's recommended length for HMAC-SHA1). */
const SEED_BYTES = 20;

export function loadOrCreateAdminTotpSeed(opts: { env: string | null; dataDir: string }): {
  seed: Buffer;
  created: boolean;
} {
  const source = opts.env ? 'HOOKRAIL_ADMIN_TOTP_SEED' : `${join(opts.dataDir, 'admin-totp-seed')}`;
  const { text, created } = opts.env
    ? { text: opts.env, created: false }
    : loadOrCreateFile(opts.dataDir, 'admin-totp-seed', () => base32Encode(randomBytes(SEED_BYTES)));
  let seed: Buffer;
  try {
    seed = base32Decode(text.replace(/\s+/g, ''));
  } catch (err) {
    throw new ConfigError(`${source} must be a base32 TOTP seed (${(err as Error).message})`);
  }
  if (seed.length < 16)
    throw new ConfigError(`${source} must be a TOTP seed of at least 16 bytes (26 base32 letters)`);
  return { seed, created };
}
