import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { controlApiDeps } from '../../../test/support/control-api.ts';
import { createSqliteStore } from '../../adapters/sqlite/sqlite-store.ts';
import { DEFAULT_EGRESS_RANGES_FILE } from '../../config/config.ts';
import { buildApi } from '../build-api.ts';
import { EgressRangesError, parseEgressRanges } from './egress-ranges.ts';

const shipped = JSON.parse(readFileSync(DEFAULT_EGRESS_RANGES_FILE, 'utf8'));
const dir = mkdtempSync(join(tmpdir(), 'hookrail-egress-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function api(egressRangesFile?: string) {
  const store = createSqliteStore({ filename: ':memory:' });
  await store.migrate();
  try {
    const app = await buildApi(controlApiDeps(store, egressRangesFile ? { egressRangesFile } : {}));
    const close = async () => {
      await app.close();
      await store.close();
    };
    return { app, close };
  } catch (err) {
    await store.close();
    throw err;
  }
}

const variant = (f: (doc: any) => void) => {
  const doc = structuredClone(shipped);
  f(doc);
  return JSON.stringify(doc);
};
const problemsOf = (text: string) => {
  try {
    parseEgressRanges(text, 'x.json');
    return '';
  } catch (err) {
    expect(err).toBeInstanceOf(EgressRangesError);
    return (err as Error).message;
  }
};

describe('GET /v1/egress-ranges', () => {
  it('serves the shipped file without credentials', async () => {
    const { app, close } = await api();
    const res = await app.inject({ method: 'GET', url: '/v1/egress-ranges' });
    await close();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(shipped);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
  });

  it('serves the file named by configuration (read once, at startup)', async () => {
    const file = join(dir, 'own.json');
    const own = variant((d) => {
      d.regions = [{ name: 'eu-west', role: 'active', cidrs: ['203.0.113.16/28'] }];
    });
    writeFileSync(file, own);
    const { app, close } = await api(file);
    writeFileSync(file, '{ "changed after startup": true }');
    const res = await app.inject({ method: 'GET', url: '/v1/egress-ranges' });
    await close();
    expect(res.json()).toEqual(JSON.parse(own));
  });

  it('refuses to start with an invalid or missing file, naming the file and the problem', async () => {
    const file = join(dir, 'bad.json');
    writeFileSync(
      file,
      variant((d) => d.regions[0].cidrs.push('192.0.2.1/24')),
    );
    await expect(api(file)).rejects.toThrow(/egress ranges file .*bad\.json is not valid.*host bits set/);
    await expect(api(join(dir, 'missing.json'))).rejects.toThrow(/missing\.json is not valid.*ENOENT/);
  });
});

describe('parseEgressRanges', () => {
  it('accepts the shipped file', () => {
    expect(problemsOf(JSON.stringify(shipped))).toBe('');
  });

  it.each([
    ['not JSON', '{', /not valid JSON/],
    [
      'an unknown field',
      variant((d) => (d.extra = 1)),
      /\/: Expected (required )?property|Unexpected property/,
    ],
    ['a bad role', variant((d) => (d.regions[0].role = 'primary')), /\/regions\/0\/role/],
    ['version 0', variant((d) => (d.version = 0)), /\/version/],
    ['a bad timestamp', variant((d) => (d.published_at = 'yesterday')), /\/published_at/],
    ['no active region', variant((d) => (d.regions[0].role = 'standby')), /no region is active/],
    ['a duplicate region', variant((d) => d.regions.push(d.regions[0])), /appears twice/],
    ['a non-CIDR', variant((d) => (d.regions[0].cidrs = ['example.com'])), /not an IP network/],
    ['an empty range list', variant((d) => (d.regions[0].cidrs = [])), /\/regions\/0\/cidrs/],
    [
      'a deprecated range not in use',
      variant((d) => (d.regions[0].deprecated = [{ cidr: '203.0.113.0/24', remove_after: '2027-01-01' }])),
      /is not in this region's cidrs/,
    ],
    [
      'a change record outside docs/interface-changes',
      variant((d) => (d.change_record = 'CHANGELOG.md')),
      /\/change_record/,
    ],
  ])('refuses %s', (_name, text, message) => {
    expect(problemsOf(text)).toMatch(message);
  });
});
