/**
 * Local envelope encryption for signing secrets (PRODUCT.md §8). Every seal draws a fresh 32-byte data key
 * that encrypts the plaintext with AES-256-GCM; the data key is itself wrapped with AES-256-GCM under the
 * master key. Both layers bind the caller's `aad`, so neither the ciphertext nor its wrapped key can be moved
 * to another row. Fresh keys per seal mean a random 96-bit IV is never at risk of reuse under one key.
 *
 * Sealed format (all base64url, no padding):
 *   v1.<kid>.<iv ‖ wrapped data key ‖ tag>.<iv>.<ciphertext>.<tag>
 * `kid` is a short fingerprint of the master key, so opening with a different HOOKRAIL_MASTER_KEY fails with
 * a message saying so, instead of a generic authentication error. Rotating the master key (re-wrapping) is
 * not implemented yet; the kid is what will make it possible.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import type { KeyService } from '../../ports/key-service.ts';

const VERSION = 'v1';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const MASTER_KEY_FILE = 'master.key';

export function masterKeyId(masterKey: Buffer): string {
  return createHash('sha256')
    .update('hookrail master key id\0')
    .update(masterKey)
    .digest('base64url')
    .slice(0, 11);
}

function gcmSeal(key: Buffer, plaintext: Buffer, aad: Buffer): { iv: Buffer; ct: Buffer; tag: Buffer } {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { iv, ct, tag: cipher.getAuthTag() };
}

function gcmOpen(key: Buffer, iv: Buffer, ct: Buffer, tag: Buffer, aad: Buffer): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ct), decipher.final()]);
}

// Distinct, versioned AAD per layer: a wrapped data key can never be fed back as a payload or vice versa.
const dataAad = (aad: string) => Buffer.from(`hookrail/${VERSION}/data\0${aad}`, 'utf8');
const wrapAad = (aad: string) => Buffer.from(`hookrail/${VERSION}/wrap\0${aad}`, 'utf8');
const b64 = (b: Buffer) => b.toString('base64url');

function fromB64(part: string): Buffer {
  if (!/^[A-Za-z0-9_-]*$/.test(part)) throw new Error('sealed value is malformed');
  return Buffer.from(part, 'base64url');
}

export function createLocalKeyService(options: { masterKey: Buffer }): KeyService {
  if (options.masterKey.length !== KEY_BYTES) throw new Error('master key must be exactly 32 bytes');
  const masterKey = Buffer.from(options.masterKey);
  const kid = masterKeyId(masterKey);
  // A separate key for MACs (HKDF, RFC 5869): the master key itself only ever wraps data keys.
  const macKey = Buffer.from(
    hkdfSync('sha256', masterKey, Buffer.alloc(0), `hookrail/${VERSION}/mac`, KEY_BYTES),
  );

  return {
    seal(plaintext, aad) {
      const dataKey = randomBytes(KEY_BYTES);
      try {
        const data = gcmSeal(dataKey, plaintext, dataAad(aad));
        const wrap = gcmSeal(masterKey, dataKey, wrapAad(aad));
        const wrapped = Buffer.concat([wrap.iv, wrap.ct, wrap.tag]);
        return [VERSION, kid, b64(wrapped), b64(data.iv), b64(data.ct), b64(data.tag)].join('.');
      } finally {
        dataKey.fill(0);
      }
    },

    open(sealed, aad) {
      const parts = sealed.split('.');
      if (parts[0] !== VERSION || parts.length !== 6)
        throw new Error('sealed value is malformed or of an unknown version');
      if (parts[1] !== kid) throw new Error('sealed value was encrypted under a different master key');
      const [wrapped, iv, ct, tag] = parts.slice(2).map(fromB64) as [Buffer, Buffer, Buffer, Buffer];
      if (
        wrapped.length !== IV_BYTES + KEY_BYTES + TAG_BYTES ||
        iv.length !== IV_BYTES ||
        tag.length !== TAG_BYTES
      ) {
        throw new Error('sealed value is malformed');
      }
      let dataKey: Buffer | undefined;
      try {
        dataKey = gcmOpen(
          masterKey,
          wrapped.subarray(0, IV_BYTES),
          wrapped.subarray(IV_BYTES, IV_BYTES + KEY_BYTES),
          wrapped.subarray(IV_BYTES + KEY_BYTES),
          wrapAad(aad),
        );
        return gcmOpen(dataKey, iv, ct, tag, dataAad(aad));
      } catch {
        // Node's message ("unable to authenticate data") does not say which cause; neither can we, by design.
        throw new Error('sealed value failed authentication: tampered, or sealed for a different aad');
      } finally {
        dataKey?.fill(0);
      }
    },

    mac(data) {
      return createHmac('sha256', macKey).update(data, 'utf8').digest('base64url');
    },
  };
}

const GENERATE_HINT = 'generate one with `openssl rand -base64 32`';

/** Strict: canonical standard base64 of exactly 32 bytes, surrounding whitespace ignored. Never echoes the value. */
function parseMasterKey(text: string, source: string): Buffer {
  const trimmed = text.trim();
  const key = Buffer.from(trimmed, 'base64');
  if (
    !/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) ||
    key.toString('base64') !== trimmed ||
    key.length !== KEY_BYTES
  ) {
    throw new Error(
      `${source} must be the base64 encoding of exactly 32 bytes (44 characters ending in "="); ${GENERATE_HINT}`,
    );
  }
  return key;
}

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function writeNew(path: string, content: string): void {
  // `wx`: fail rather than overwrite — an existing key file is never replaced, or its secrets become unreadable.
  const fd = openSync(path, 'wx', 0o600);
  try {
    fchmodSync(fd, 0o600); // the open mode is filtered by umask; make it exactly 0600
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * The master key from HOOKRAIL_MASTER_KEY, else from `<dataDir>/master.key`, created at first start. An empty
 * env value counts as unset (compose files often pass `VAR=` through). Two processes starting at once agree on
 * one key: the new key is written to a private temp file and hard-linked into place, which fails if another
 * process got there first, so a reader never sees a half-written file; everyone then reads the winner's key.
 * Back up the file (or set the env var): losing it makes every stored signing secret unrecoverable.
 */
export function loadOrCreateMasterKey(options: { env: string | undefined; dataDir: string }): Buffer {
  if (options.env !== undefined && options.env.trim() !== '') {
    return parseMasterKey(options.env, 'HOOKRAIL_MASTER_KEY');
  }
  const path = join(options.dataDir, MASTER_KEY_FILE);
  const source = `key file ${path}`;
  const existing = readIfExists(path);
  if (existing !== undefined) return parseMasterKey(existing, source);

  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const content = `${randomBytes(KEY_BYTES).toString('base64')}\n`;
  const tmp = join(options.dataDir, `.${MASTER_KEY_FILE}.${process.pid}.${randomBytes(6).toString('hex')}`);
  writeNew(tmp, content);
  try {
    linkSync(tmp, path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EEXIST') {
      // Filesystems without hard links: fall back to an exclusive create of the final file.
      try {
        writeNew(path, content);
      } catch (inner) {
        if ((inner as NodeJS.ErrnoException).code !== 'EEXIST') throw inner;
      }
    }
  } finally {
    unlinkSync(tmp);
  }
  return parseMasterKey(readFileSync(path, 'utf8'), source);
}
