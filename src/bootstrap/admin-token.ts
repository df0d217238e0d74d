/**
 * The operator token: HOOKRAIL_ADMIN_TOKEN when set; otherwise generated at first start, stored (0600) in the data
 * directory, and reported as `created` so the caller prints it once.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function loadOrCreateAdminToken(opts: { env: string | null; dataDir: string }): {
  token: string;
  created: boolean;
} {
  if (opts.env) return { token: opts.env, created: false };
  const file = join(opts.dataDir, 'admin-token');
  try {
    return { token: readFileSync(file, 'utf8').trim(), created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(opts.dataDir, { recursive: true });
  const token = `hka_${randomBytes(32).toString('base64url')}`;
  try {
    writeFileSync(file, `${token}\n`, { mode: 0o600, flag: 'wx' });
    return { token, created: true };
  } catch (err) {
    // Another process created it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      return { token: readFileSync(file, 'utf8').trim(), created: false };
    }
    throw err;
  }
}
