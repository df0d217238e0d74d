/**
 * The guarded sender against real loopback servers, with a stub resolver (no DNS, no network beyond `lo`).
 * "Public" in this world is 127.0.0.1 (the only allowed network); the sentinel on 127.0.0.2 plays an internal
 * service, and its connection count must stay zero through every scenario in this file.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type LoopbackServer,
  makeSelfSignedCert,
  signedRequest,
  startHttpServer,
  startHttpsServer,
  stubResolver,
} from '../../../test/support/loopback-servers.ts';
import type { SendResult } from '../../ports/http-sender.ts';
import { GuardedDestinationChecker } from './destination-checker.ts';
import type { GuardRefusal } from './guarded-agent.ts';
import { UndiciSender, type UndiciSenderOptions } from './undici-sender.ts';

const ALLOW = ['127.0.0.1/32'];
let sentinel: LoopbackServer;
let app: LoopbackServer; // the tenant's endpoint; scripted by path
let other: LoopbackServer; // another origin on the allowed address
let secure: LoopbackServer; // https, certificate for secure.example.com
const cert = makeSelfSignedCert('secure.example.com');
const senders: UndiciSender[] = [];

/** Paths on `app`: /status/<n>, /redirect/<n>?to=<url> (n = 301…308), /chain/<k> (k redirects left). */
function appHandler(base: () => LoopbackServer) {
  return (req: { url?: string }, res: import('node:http').ServerResponse) => {
    const u = new URL(req.url ?? '/', 'http://x');
    const [, kind, arg] = u.pathname.split('/');
    if (kind === 'status') {
      if (arg === '503' || arg === '429') res.setHeader('retry-after', '120');
      res.writeHead(Number(arg));
      return res.end(`status ${arg}`);
    }
    if (kind === 'redirect') {
      res.writeHead(Number(arg), u.searchParams.has('to') ? { location: u.searchParams.get('to')! } : {});
      return res.end();
    }
    if (kind === 'chain') {
      const left = Number(arg);
      if (left === 0) return res.end('end of chain');
      res.writeHead(307, { location: base().url(`/chain/${left - 1}`) });
      return res.end();
    }
    if (kind === 'big') return res.end('x'.repeat(10_000));
    res.end('ok');
  };
}

const { resolver, calls } = stubResolver({
  'hooks.example.com': ['127.0.0.1'],
  'other.example.com': ['127.0.0.1'],
  'secure.example.com': ['127.0.0.1'],
  'wrongname.example.com': ['127.0.0.1'],
  'internal.example.com': ['127.0.0.2'],
  'mixed.example.com': ['127.0.0.1', '127.0.0.2'],
  'mixed-reversed.example.com': ['127.0.0.2', '127.0.0.1'],
  'mixed-v6.example.com': ['127.0.0.1', '::1'],
  'metadata.example.com': ['169.254.169.254'],
  'empty.example.com': [],
  // Rebinding: public for the registration check, the internal sentinel for everything after.
  'rebind.example.com': (n) => (n === 1 ? ['93.184.215.14'] : ['127.0.0.2']),
});
const refusals: GuardRefusal[] = [];

function makeSender(extra: UndiciSenderOptions = {}): UndiciSender {
  const s = new UndiciSender({
    allowNetworks: ALLOW,
    resolver,
    userAgent: 'Hookrail/test',
    ca: cert.cert,
    onRefusal: (r) => refusals.push(r),
    ...extra,
  });
  senders.push(s);
  return s;
}

function expectError(r: SendResult, errorClass: string): asserts r is Extract<SendResult, { kind: 'error' }> {
  expect(r.kind === 'error' ? r.errorClass : `response ${r.kind === 'response' ? r.status : ''}`).toBe(
    errorClass,
  );
}
function expectStatus(r: SendResult, status: number): asserts r is Extract<SendResult, { kind: 'response' }> {
  expect(r.kind === 'response' ? r.status : `error ${r.kind === 'error' ? r.errorClass : ''}`).toBe(status);
}

beforeAll(async () => {
  sentinel = await startHttpServer('127.0.0.2', (_q, res) => res.end('INTERNAL-SECRET'));
  app = await startHttpServer(
    '127.0.0.1',
    appHandler(() => app),
  );
  other = await startHttpServer(
    '127.0.0.1',
    appHandler(() => other),
  );
  secure = await startHttpsServer(
    '127.0.0.1',
    cert,
    appHandler(() => secure),
  );
});

afterEach(() => {
  expect(sentinel.connections).toBe(0);
});

afterAll(async () => {
  await Promise.all(senders.map((s) => s.close()));
  for (const s of [sentinel, app, other, secure]) await s?.close();
  expect(sentinel.connections).toBe(0);
});

const hooks = (path: string, srv = app) => srv.url(path, 'hooks.example.com');

describe('a plain delivery', () => {
  it('POSTs the body with exactly the recorded headers, and passes the response through', async () => {
    let clock = 1_000;
    const sender = makeSender({ now: () => clock++ });
    const { req } = signedRequest(hooks('/status/503'), {
      custom: { 'x-api-key': 'k1', 'User-Agent': 'custom' },
    });
    const before = app.requests.length;
    const r = await sender.send(req);
    expectStatus(r, 503);
    expect(r.headers['retry-after']).toBe('120');
    expect(r.bodyPrefix.toString()).toBe('status 503');
    const got = app.requests[before]!;
    expect(got.method).toBe('POST');
    expect(got.body.equals(req.body)).toBe(true);
    expect(r.hops).toHaveLength(1);
    const sent = r.hops[0]!.requestHeaders;
    for (const [k, v] of Object.entries(sent)) expect(got.headers[k], k).toBe(v);
    // Everything the server saw is in the record, except undici's own connection management.
    expect(Object.keys(got.headers).filter((k) => !(k in sent))).toEqual(['connection']);
    expect(sent).toMatchObject({ host: `hooks.example.com:${app.port}`, 'accept-encoding': 'identity' });
    expect(sent['user-agent']).toBe('custom'); // the caller's builder decides; the option is only a default
    expect(r.hops[0]!.status).toBe(503);
    const t = r.timings;
    expect(t.startedAt).toBe(1_000);
    expect(t.wireAt).not.toBeNull();
    expect(t.startedAt < t.wireAt! && t.wireAt! < t.responseAt! && t.responseAt! < t.finishedAt).toBe(true);
  });

  it.each([200, 201, 204, 300, 304, 400, 404, 408, 410, 429, 500, 502])(
    'returns status %i as a response',
    async (s) => {
      const r = await makeSender().send(signedRequest(hooks(`/status/${s}`)).req);
      expectStatus(r, s);
      if (s === 429) expect(r.headers['retry-after']).toBe('120');
    },
  );

  it('returns a redirect status without a Location as a response (permanent downstream)', async () => {
    expectStatus(await makeSender().send(signedRequest(hooks('/redirect/307')).req), 307);
  });

  it('keeps the first 4 KiB of a small body and reuses the kept-alive connection', async () => {
    const sender = makeSender();
    const before = app.connections;
    for (let i = 0; i < 5; i++) {
      const r = await sender.send(signedRequest(hooks('/big')).req);
      expectStatus(r, 200);
      expect(r.bodyPrefix.length).toBe(4096);
    }
    // undici's pool opens a second socket while the first is still marked busy, then reuses both.
    expect(app.connections - before).toBeLessThanOrEqual(2);
  });

  it('sets user-agent from the option when the caller has none, and binds the egress source address', async () => {
    const sender = makeSender({ localAddress: '127.0.0.3', allowNetworks: ['127.0.0.1/32'] });
    const { req } = signedRequest(hooks('/status/200'));
    const r = await sender.send(req);
    expectStatus(r, 200);
    expect(r.hops[0]!.requestHeaders['user-agent']).toBe('Hookrail/test');
    expect(app.requests.at(-1)!.remoteAddress).toBe('127.0.0.3');
  });

  it('refuses an allowed address that a denied network covers, at registration and at connect', async () => {
    const sender = makeSender({ denyNetworks: ['127.0.0.1/32'] });
    const r = await sender.send(signedRequest(hooks('/status/200')).req);
    expectError(r, 'destination_blocked');
    expect(refusals.at(-1)).toMatchObject({ address: '127.0.0.1', reason: 'denied network (127.0.0.1/32)' });
    const checker = new GuardedDestinationChecker({
      allowNetworks: ALLOW,
      denyNetworks: ['127.0.0.1/32'],
      resolver,
    });
    expect(await checker.check(hooks('/'))).toMatchObject({ ok: false });
    expect(await checker.check('http://127.0.0.1:9/')).toMatchObject({ ok: false });
    // Without the deny entry the same destination is allowed.
    expect(
      (await new GuardedDestinationChecker({ allowNetworks: ALLOW, resolver }).check(hooks('/'))).ok,
    ).toBe(true);
  });

  it('classifies refused connections and resolution failures', async () => {
    const closed = await startHttpServer('127.0.0.1', () => undefined);
    const port = closed.port;
    await closed.close();
    const sender = makeSender();
    expectError(await sender.send(signedRequest(`http://hooks.example.com:${port}/`).req), 'connect_refused');
    for (const host of ['nowhere.example.com', 'empty.example.com']) {
      const r = await sender.send(signedRequest(`http://${host}/`).req);
      expectError(r, 'dns');
      expect(r.message).toBe('host name could not be resolved');
    }
  });

  it('times out the connect phase (here: a resolver that never answers)', async () => {
    const hang = { resolve: () => new Promise<string[]>(() => undefined) };
    const r = await makeSender({ resolver: hang, connectTimeoutMs: 200 }).send(
      signedRequest('http://slow.example/').req,
    );
    expectError(r, 'connect_timeout');
  });

  it('turns a header value the transport refuses into a network error instead of throwing', async () => {
    const { req } = signedRequest(hooks('/status/200'), { custom: { 'x-bad': 'a\r\nx-injected: 1' } });
    const r = await makeSender().send(req);
    expectError(r, 'network');
    expect(r.message).toBe('invalid request header');
  });

  it('refuses a stored URL that fails the URL policy, before any connection', async () => {
    for (const url of ['http://localhost:1/', 'http://2130706433/', 'ftp://hooks.example.com/']) {
      const r = await makeSender().send(signedRequest(url).req);
      expectError(r, 'destination_blocked');
      expect(r.hops).toEqual([]);
    }
    const r = await makeSender({ httpsOnly: true }).send(signedRequest(hooks('/')).req);
    expectError(r, 'destination_blocked');
    expect(r.message).toBe('URL must use https');
  });
});

describe('the address guard', () => {
  it.each([
    ['a literal internal address', () => sentinel.url('/')],
    ['an IPv4-mapped literal', () => sentinel.url('/', '::ffff:127.0.0.2')],
    ['IPv6 loopback', () => sentinel.url('/', '::1')],
    ['the unspecified address', () => sentinel.url('/', '0.0.0.0')],
    ['the metadata address', () => 'http://169.254.169.254/latest/meta-data/'],
    ['a name resolving to an internal address', () => sentinel.url('/', 'internal.example.com')],
    ['a name resolving to metadata', () => 'http://metadata.example.com/latest/'],
    ['a name with a public and a private answer', () => sentinel.url('/', 'mixed.example.com')],
    ['the same, private answer first', () => sentinel.url('/', 'mixed-reversed.example.com')],
    ['the same, private IPv6 answer', () => app.url('/', 'mixed-v6.example.com')],
  ])('refuses %s without connecting, and never names the address', async (_name, url) => {
    const appBefore = app.connections;
    refusals.length = 0;
    const r = await makeSender().send(signedRequest(url()).req);
    expectError(r, 'destination_blocked');
    expect(r.message).toBe('destination not allowed');
    expect(app.connections).toBe(appBefore); // the allowed half of a mixed answer is not dialled either
    expect(refusals.length).toBeGreaterThan(0); // the operator hook does see it
  });

  it('defeats DNS rebinding: checked public at registration, internal at connect → refused', async () => {
    const checker = new GuardedDestinationChecker({ allowNetworks: ALLOW, resolver });
    const url = sentinel.url('/', 'rebind.example.com');
    expect(await checker.check(url)).toEqual({ ok: true, url });
    const r = await makeSender().send(signedRequest(url).req);
    expectError(r, 'destination_blocked');
    expect(calls.filter((h) => h === 'rebind.example.com')).toHaveLength(2);
  });
});

describe('redirects', () => {
  it.each([301, 302, 303, 307, 308])(
    '%i: re-POSTs the same body, re-signed, custom headers kept on the same origin',
    async (code) => {
      const sender = makeSender();
      const { req, seen } = signedRequest(hooks(`/redirect/${code}?to=/status/200`), {
        custom: { 'x-api-key': 'k1' },
      });
      const before = app.requests.length;
      const r = await sender.send(req);
      expectStatus(r, 200);
      expect(r.hops.map((h) => h.status)).toEqual([code, 200]);
      const [first, second] = app.requests.slice(before);
      expect(second!.method).toBe('POST');
      expect(second!.body.equals(req.body)).toBe(true);
      expect(second!.headers['x-api-key']).toBe('k1');
      expect(second!.headers['webhook-signature']).not.toBe(first!.headers['webhook-signature']);
      expect(seen.map((s) => s.sameOrigin)).toEqual([true, true]);
    },
  );

  it('drops custom headers once the origin changes (for good) and recomputes the signature', async () => {
    const back = hooks('/status/200');
    const via = other.url(`/redirect/308?to=${encodeURIComponent(back)}`, 'other.example.com');
    const { req, seen } = signedRequest(hooks(`/redirect/307?to=${encodeURIComponent(via)}`), {
      custom: { 'x-api-key': 'k1' },
    });
    const r = await makeSender().send(req);
    expectStatus(r, 200);
    expect(seen.map((s) => s.sameOrigin)).toEqual([true, false, false]);
    const [h0, h1, h2] = r.hops.map((h) => h.requestHeaders);
    expect(h0!['x-api-key']).toBe('k1');
    expect(h1!['x-api-key']).toBeUndefined();
    expect(h2!['x-api-key']).toBeUndefined();
    expect(new Set([h0, h1, h2].map((h) => h!['webhook-signature'])).size).toBe(3);
    expect(other.requests.at(-1)!.headers['x-api-key']).toBeUndefined();
    expect(other.requests.at(-1)!.headers['webhook-signature']).toBe(h1!['webhook-signature']);
    expect(r.hops.map((h) => h.url)).toEqual([req.url, via, back]);
  });

  it('follows 3 redirects and refuses the 4th (4 requests made)', async () => {
    const sender = makeSender();
    expectStatus(await sender.send(signedRequest(hooks('/chain/3')).req), 200);
    const before = app.requests.length;
    const r = await sender.send(signedRequest(hooks('/chain/4')).req);
    expectError(r, 'redirect_rejected');
    expect(r.message).toBe('redirect rejected: more than 3 redirects');
    expect(app.requests.length - before).toBe(4);
    expect(r.hops).toHaveLength(4);
  });

  it.each([
    ['the metadata address', 'http://169.254.169.254/latest/meta-data/'],
    ['an internal literal', () => sentinel.url('/')],
    ['an IPv4-mapped internal literal', () => sentinel.url('/', '::ffff:127.0.0.2')],
    ['a name resolving internally', () => sentinel.url('/', 'internal.example.com')],
    ['a mixed answer', () => sentinel.url('/', 'mixed.example.com')],
    ['a non-canonical literal', () => `http://0x7f.0.0.2:${sentinel.port}/`],
    ['a scheme-relative non-canonical literal', () => `//2130706434:${sentinel.port}/`],
    ['localhost', () => `http://localhost:${sentinel.port}/`],
    ['a non-http scheme', 'file:///etc/passwd'],
    ['credentials', () => `http://user:pw@hooks.example.com:${app.port}/`],
  ])('refuses a redirect to %s as redirect_rejected', async (_name, to) => {
    const target = typeof to === 'function' ? to() : to;
    const r = await makeSender().send(
      signedRequest(hooks(`/redirect/307?to=${encodeURIComponent(target)}`)).req,
    );
    expectError(r, 'redirect_rejected');
    expect(r.message).toMatch(/^redirect rejected: /);
    expect(r.message).not.toMatch(/127\.0|169\.254/);
  });

  it('refuses https → http downgrades, and follows https → https', async () => {
    const sender = makeSender();
    const ok = await sender.send(
      signedRequest(secure.url('/redirect/308?to=/status/200', 'secure.example.com')).req,
    );
    expectStatus(ok, 200);
    const before = app.requests.length;
    const down = encodeURIComponent(hooks('/status/200'));
    const r = await sender.send(
      signedRequest(secure.url(`/redirect/302?to=${down}`, 'secure.example.com')).req,
    );
    expectError(r, 'redirect_rejected');
    expect(r.message).toBe('redirect rejected: redirect from https to http is not allowed');
    expect(app.requests.length).toBe(before);
  });

  it('classifies certificate problems as tls', async () => {
    const wrong = await makeSender().send(signedRequest(secure.url('/', 'wrongname.example.com')).req);
    expectError(wrong, 'tls');
    expect(wrong.message).toBe('TLS handshake failed (ERR_TLS_CERT_ALTNAME_INVALID)');
    const untrusted = await makeSender({ ca: undefined }).send(
      signedRequest(secure.url('/', 'secure.example.com')).req,
    );
    expectError(untrusted, 'tls');
    const plain = await makeSender().send(signedRequest(`https://hooks.example.com:${app.port}/`).req);
    expectError(plain, 'tls');
  });
});

describe('GuardedDestinationChecker', () => {
  const checker = new GuardedDestinationChecker({ allowNetworks: ALLOW, resolver });
  it.each([
    ['https://hooks.example.com/x', { ok: true, url: 'https://hooks.example.com/x' }],
    ['https://HOOKS.example.com./x', { ok: true, url: 'https://hooks.example.com/x' }],
    ['http://127.0.0.1:9/', { ok: true, url: 'http://127.0.0.1:9/' }],
    ['http://127.0.0.2/', { ok: false, reason: 'destination not allowed' }],
    ['http://[::ffff:a9fe:a9fe]/', { ok: false, reason: 'destination not allowed' }],
    ['https://internal.example.com/', { ok: false, reason: 'destination not allowed' }],
    ['https://mixed.example.com/', { ok: false, reason: 'destination not allowed' }],
    ['https://nowhere.example.com/', { ok: false, reason: 'host name could not be resolved' }],
    ['https://localhost/', { ok: false, reason: 'destination not allowed' }],
    ['https://u:p@hooks.example.com/', { ok: false, reason: 'URL must not contain credentials' }],
  ])('%s', async (url, expected) => {
    expect(await checker.check(url)).toEqual(expected);
  });

  it('bounds a slow resolver', async () => {
    const slow = new GuardedDestinationChecker({
      resolver: { resolve: () => new Promise<string[]>(() => undefined) },
      resolveTimeoutMs: 50,
    });
    expect(await slow.check('https://slow.example.com/')).toEqual({
      ok: false,
      reason: 'host name could not be resolved',
    });
  });
});
