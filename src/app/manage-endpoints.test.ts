import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { asTenant, createTestStore, type TestStore } from '../../test/support/test-hookrail.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
import { GuardedDestinationChecker } from '../adapters/http/destination-checker.ts';
import { ApiError } from '../domain/errors.ts';
import type { DestinationChecker } from '../ports/http-sender.ts';
import {
  canonicalEndpointUrl,
  checkCustomHeaders,
  checkEventTypes,
  createEndpoint,
  EVENT_TYPE_FILTER_PATTERN,
  HEADER_VALUE_PATTERN,
} from './manage-endpoints.ts';
import { createTenant } from './manage-tenants.ts';
import { secretAad } from './secret-cache.ts';

const code = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return (err as ApiError).code;
  }
  return 'ok';
};

describe('endpoint input rules', () => {
  it('canonicalises URLs and names the reason for a refusal', () => {
    expect(canonicalEndpointUrl('HTTPS://Example.COM:443/a/../b?q=1#frag')).toBe(
      'https://example.com/b?q=1#frag',
    );
    expect(canonicalEndpointUrl('http://example.com.:8080')).toBe('http://example.com:8080/');
    expect(code(() => canonicalEndpointUrl('ftp://example.com/'))).toBe('invalid_url');
    expect(code(() => canonicalEndpointUrl('https://a:b@example.com/'))).toBe('invalid_url');
    expect(code(() => canonicalEndpointUrl('https://metadata/'))).toBe('destination_not_allowed');
    // Within the limit as typed, over it once encoded (the form stored and sent): a URL-shape refusal.
    expect(code(() => canonicalEndpointUrl(`https://example.com/${'é'.repeat(2000)}`))).toBe('invalid_url');
    expect(code(() => canonicalEndpointUrl(`https://example.com/${'é'.repeat(338)}`))).toBe('ok'); // 2048
    expect(code(() => canonicalEndpointUrl(`https://example.com/${'é'.repeat(339)}`))).toBe('invalid_url');
    expect(code(() => canonicalEndpointUrl('http://example.com/', { httpsOnly: true }))).toBe('invalid_url');
    try {
      canonicalEndpointUrl('https://@example.com/');
    } catch (err) {
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).details).toEqual({ reason: 'credentials_not_allowed' });
    }
  });

  it('accepts header names of any case once, lower-cased; refuses ours and connection-level ones', () => {
    expect(checkCustomHeaders({ 'X-Team': 'a b', Authorization: 'Basic eA==' })).toEqual({
      'x-team': 'a b',
      authorization: 'Basic eA==',
    });
    const proto = checkCustomHeaders(JSON.parse('{"__proto__":"x"}'));
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
    expect(Object.keys(proto)).toEqual(['__proto__']);
    for (const name of [
      'Keep-Alive',
      'TE',
      'Trailer',
      'Upgrade',
      'Expect',
      'Content-Length',
      'Content-Encoding',
      'Accept-Encoding',
      'proxy-connection',
      'webhook-timestamp',
    ]) {
      expect(
        code(() => checkCustomHeaders({ [name]: 'x' })),
        name,
      ).toBe('header_not_allowed');
    }
    expect(code(() => checkCustomHeaders({ a: 'x', A: 'y' }))).toBe('validation_failed');
    expect(code(() => checkCustomHeaders({ 'x-a': 'a\u0000b' }))).toBe('validation_failed');
    expect(code(() => checkCustomHeaders({ 'x-a': 'a\tb' }))).toBe('ok');
    expect(new RegExp(HEADER_VALUE_PATTERN).test('a\r\nb')).toBe(false);
  });

  it.each([
    // Forwarding headers: a receiver or its proxies may take them for the client's address.
    ['Forwarded', 'for=10.0.0.1'],
    ['X-Forwarded-For', '10.0.0.1'],
    ['x-forwarded-host', 'internal'],
    ['X-Forwarded-Proto', 'https'],
    ['x-forwarded-anything', 'x'],
    ['X-Real-IP', '10.0.0.1'],
    // Cloud metadata unlock headers, and the cloud API prefixes.
    ['Metadata', 'true'],
    ['Metadata-Flavor', 'Google'],
    ['X-Google-Metadata-Request', 'True'],
    ['X-aws-ec2-metadata-token', 'abc'],
    ['x-aws-ec2-metadata-token-ttl-seconds', '21600'],
    ['X-Amz-Security-Token', 'abc'],
    ['x-amz-date', '20250101T000000Z'],
    ['X-Goog-User-Project', 'p'],
    ['x-azure-ref', 'r'],
  ])('refuses the %s header with header_not_allowed', (name, value) => {
    let err: unknown;
    try {
      checkCustomHeaders({ 'x-team': 'a', [name]: value });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: 'header_not_allowed', status: 400, details: { header: name } });
  });

  it.each([
    'x-forwarded',
    'x-forward-to',
    'x-realip',
    'metadata-x',
    'x-google-project',
    'x-amz',
    'x-goog',
    'x-azure',
    'x-aws-region',
    'authorization',
  ])('still accepts the %s header, which no refused name or prefix covers', (name) => {
    expect(checkCustomHeaders({ [name]: 'v' })).toEqual({ [name]: 'v' });
  });

  it('accepts exact, prefix and catch-all filters only', () => {
    const re = new RegExp(EVENT_TYPE_FILTER_PATTERN);
    for (const ok of ['*', 'order', 'order.created', 'order.*', 'v2.user-x.deleted_y.*'])
      expect(re.test(ok), ok).toBe(true);
    for (const bad of ['', '**', 'order.', '.*', 'order.*.x', 'or der', '*.created', 'order*']) {
      expect(re.test(bad), bad).toBe(false);
      expect(
        code(() => checkEventTypes([bad])),
        bad,
      ).toBe('validation_failed');
    }
    expect(code(() => checkEventTypes(['a', 'a']))).toBe('validation_failed');
  });
});

describe('createEndpoint', () => {
  let ts: TestStore | undefined;
  afterEach(() => ts?.destroy());

  it('asks the destination checker when there is one, and stores its URL; seals the secret for the endpoint', async () => {
    ts = await createTestStore('sqlite');
    const clock = new FakeClock();
    const keys = createLocalKeyService({ masterKey: Buffer.alloc(32, 7) });
    const base = { store: ts.store, clock, random: seededRandom(1), keys };
    const { tenant } = await createTenant(base, { name: 'a' });
    const seen: string[] = [];
    const destinations: DestinationChecker = {
      httpsOnly: false,
      check: async (url) => {
        seen.push(url);
        return url.includes('blocked')
          ? { ok: false, reason: 'resolves to a private address' }
          : { ok: true, url };
      },
    };
    const deps = { ...base, destinations };
    await expect(
      createEndpoint(deps, asTenant(tenant.id), { url: 'https://blocked.example.com/', eventTypes: ['*'] }),
    ).rejects.toMatchObject({ code: 'destination_not_allowed', status: 422 });
    // The shape check runs first: no lookup for a URL that is refused anyway.
    await expect(
      createEndpoint(deps, asTenant(tenant.id), { url: 'ftp://x.example.com/', eventTypes: ['*'] }),
    ).rejects.toMatchObject({
      code: 'invalid_url',
    });
    const created = await createEndpoint(deps, asTenant(tenant.id), {
      url: 'https://ok.example.com',
      eventTypes: ['*'],
    });
    expect(seen).toEqual(['https://blocked.example.com/', 'https://ok.example.com/']);
    expect(created.endpoint.url).toBe('https://ok.example.com/');
    const [stored] = await ts.store.secretListActive({ endpointId: created.endpoint.id, now: clock.now() });
    expect(keys.open(stored!.sealed, secretAad(tenant.id, created.endpoint.id)).toString()).toBe(
      created.secretValue,
    );
    expect(() => keys.open(stored!.sealed, secretAad(tenant.id, 'ep_other'))).toThrow();
    const page = await ts.store.endpointList({ tenantId: null, limit: 10, cursor: null });
    expect(page.data).toHaveLength(1);
  });

  it("checks the URL's shape under the checker's https-only policy first: 400 without a lookup, 422 for the address", async () => {
    ts = await createTestStore('sqlite');
    const base = {
      store: ts.store,
      clock: new FakeClock(),
      random: seededRandom(2),
      keys: createLocalKeyService({ masterKey: Buffer.alloc(32, 7) }),
    };
    const { tenant } = await createTenant(base, { name: 'a' });
    const looked: string[] = [];
    const destinations = new GuardedDestinationChecker({
      httpsOnly: true,
      resolver: {
        resolve: async (host: string) => {
          looked.push(host);
          return host === 'inward.example.com' ? ['10.0.0.1'] : ['93.184.215.14'];
        },
      },
    });
    const deps = { ...base, destinations };
    const create = (url: string) => createEndpoint(deps, asTenant(tenant.id), { url, eventTypes: ['*'] });
    await expect(create('http://hooks.example.com/')).rejects.toMatchObject({
      code: 'invalid_url',
      status: 400,
      details: { reason: 'scheme_not_allowed' },
    });
    await expect(create(`https://hooks.example.com/${'é'.repeat(2000)}`)).rejects.toMatchObject({
      code: 'invalid_url',
      status: 400,
      details: { reason: 'invalid_url' },
    });
    expect(looked).toEqual([]);
    await expect(create('https://inward.example.com/')).rejects.toMatchObject({
      code: 'destination_not_allowed',
      status: 422,
    });
    await expect(create('https://hooks.example.com/')).resolves.toMatchObject({
      endpoint: { url: 'https://hooks.example.com/' },
    });
    expect(looked).toEqual(['inward.example.com', 'hooks.example.com']);
  });
});
