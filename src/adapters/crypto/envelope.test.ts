import { createHmac } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { seededRandom } from '../../../test/support/seeded-random.ts';
import { createLocalKeyService, loadOrCreateMasterKey, MASTER_KEY_FILE } from './envelope.ts';

const MASTER = seededRandom(1).bytes(32);
const OTHER_MASTER = seededRandom(2).bytes(32);
const AAD = 'tenant:ten_01/endpoint:ep_01';
const SECRET = Buffer.from('whsec_tnDbD7Ba0F2QcdRO8oU4Z8eShJIZEAhFNvOd4YTPavA=');

describe('createLocalKeyService', () => {
  const ks = createLocalKeyService({ masterKey: MASTER });

  it('roundtrips, including empty and large plaintexts', () => {
    for (const plaintext of [SECRET, Buffer.alloc(0), seededRandom(3).bytes(100_000)]) {
      expect(ks.open(ks.seal(plaintext, AAD), AAD).equals(plaintext)).toBe(true);
    }
  });

  it('produces the versioned compact format with a fresh data key and IV every time', () => {
    const a = ks.seal(SECRET, AAD);
    const b = ks.seal(SECRET, AAD);
    expect(a).toMatch(/^v1\.[A-Za-z0-9_-]{11}(\.[A-Za-z0-9_-]+){4}$/);
    expect(a).not.toBe(b);
    const [, kidA, wrappedA, ivA] = a.split('.');
    const [, kidB, wrappedB, ivB] = b.split('.');
    expect(kidA).toBe(kidB);
    expect(wrappedA).not.toBe(wrappedB);
    expect(ivA).not.toBe(ivB);
    expect(a).not.toContain(SECRET.toString('base64url'));
  });

  it('opens with a second instance built from the same master key', () => {
    const sealed = ks.seal(SECRET, AAD);
    expect(
      createLocalKeyService({ masterKey: Buffer.from(MASTER) })
        .open(sealed, AAD)
        .equals(SECRET),
    ).toBe(true);
  });

  it.each(['tenant:ten_01/endpoint:ep_02', 'tenant:ten_02/endpoint:ep_01', '', `${AAD} `])(
    'fails with the wrong aad %j',
    (aad) => {
      expect(() => ks.open(ks.seal(SECRET, AAD), aad)).toThrow(/failed authentication/);
    },
  );

  it('computes a MAC that is deterministic per master key, differs across keys and never is the master key', () => {
    const again = createLocalKeyService({ masterKey: Buffer.from(MASTER) });
    const other = createLocalKeyService({ masterKey: OTHER_MASTER });
    expect(ks.mac('su1.data')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(again.mac('su1.data')).toBe(ks.mac('su1.data'));
    expect(other.mac('su1.data')).not.toBe(ks.mac('su1.data'));
    expect(ks.mac('su1.datb')).not.toBe(ks.mac('su1.data'));
    // Derived (HKDF), not keyed with the master key directly.
    const direct = createHmac('sha256', MASTER).update('su1.data').digest('base64url');
    expect(ks.mac('su1.data')).not.toBe(direct);
  });

  it('fails under a different master key with a clear message', () => {
    const sealed = ks.seal(SECRET, AAD);
    expect(() => createLocalKeyService({ masterKey: OTHER_MASTER }).open(sealed, AAD)).toThrow(
      /different master key/,
    );
  });

  it('fails when any part is tampered with', () => {
    const sealed = ks.seal(SECRET, AAD);
    const parts = sealed.split('.');
    for (let i = 2; i < parts.length; i++) {
      const raw = Buffer.from(parts[i]!, 'base64url');
      raw[raw.length - 1]! ^= 0x01;
      const tampered = [...parts.slice(0, i), raw.toString('base64url'), ...parts.slice(i + 1)].join('.');
      expect(() => ks.open(tampered, AAD), `part ${i}`).toThrow();
    }
  });

  it('fails when the data layer is spliced from another seal (same master, same aad)', () => {
    const a = ks.seal(SECRET, AAD).split('.');
    const b = ks.seal(SECRET, AAD).split('.');
    const spliced = [...a.slice(0, 3), ...b.slice(3)].join('.');
    expect(() => ks.open(spliced, AAD)).toThrow(/failed authentication/);
  });

  it.each(['', 'v1', 'v2.a.b.c.d.e', 'v1.a.b.c.d', 'v1.a.b.c.d.e.f', 'not sealed at all'])(
    'rejects malformed %j',
    (value) => {
      expect(() => ks.open(value, AAD)).toThrow();
    },
  );

  it('rejects a master key that is not 32 bytes', () => {
    expect(() => createLocalKeyService({ masterKey: Buffer.alloc(16) })).toThrow(/32 bytes/);
  });
});

describe('loadOrCreateMasterKey', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'hookrail-mk-'));
    dirs.push(d);
    return d;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('uses HOOKRAIL_MASTER_KEY when set, and creates no file', () => {
    const dir = tempDir();
    const env = `${MASTER.toString('base64')}\n`;
    expect(loadOrCreateMasterKey({ env, dataDir: dir }).equals(MASTER)).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
  });

  it.each([
    ['too short', Buffer.alloc(16, 7).toString('base64')],
    ['too long', Buffer.alloc(33, 7).toString('base64')],
    ['hex', MASTER.toString('hex')],
    ['base64url', Buffer.alloc(32, 0xfb).toString('base64url')],
    ['garbage', 'correct horse battery staple'],
    ['non-canonical', `${MASTER.toString('base64').slice(0, 42)}B=`],
  ])('rejects a %s env value without echoing it', (_name, env) => {
    const dir = tempDir();
    let message = '';
    try {
      loadOrCreateMasterKey({ env, dataDir: dir });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/HOOKRAIL_MASTER_KEY must be the base64 encoding of exactly 32 bytes/);
    expect(message).not.toContain(env);
  });

  it('creates a 0600 key file (and the data dir) at first start and reuses it', () => {
    const dir = join(tempDir(), 'nested', 'data');
    const first = loadOrCreateMasterKey({ env: undefined, dataDir: dir });
    expect(first).toHaveLength(32);
    const file = join(dir, MASTER_KEY_FILE);
    if (process.platform !== 'win32') expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8')).toBe(`${first.toString('base64')}\n`);
    expect(readdirSync(dir)).toEqual([MASTER_KEY_FILE]);
    const second = loadOrCreateMasterKey({ env: '', dataDir: dir });
    expect(second.equals(first)).toBe(true);
  });

  it('seals with a file key and opens after a "restart"', () => {
    const dir = tempDir();
    const sealed = createLocalKeyService({
      masterKey: loadOrCreateMasterKey({ env: undefined, dataDir: dir }),
    }).seal(SECRET, AAD);
    const reopened = createLocalKeyService({
      masterKey: loadOrCreateMasterKey({ env: undefined, dataDir: dir }),
    });
    expect(reopened.open(sealed, AAD).equals(SECRET)).toBe(true);
  });

  it('refuses a corrupt key file instead of replacing it', () => {
    const dir = tempDir();
    writeFileSync(join(dir, MASTER_KEY_FILE), 'oops\n', { mode: 0o600 });
    expect(() => loadOrCreateMasterKey({ env: undefined, dataDir: dir })).toThrow(
      /key file .*master\.key must be/,
    );
    expect(readFileSync(join(dir, MASTER_KEY_FILE), 'utf8')).toBe('oops\n');
  });
});
