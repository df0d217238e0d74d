/**
 * Table-driven tests for the address policy. The tables are generated: every special-purpose range contributes
 * its first, middle and last address, and each of those is written in every encoding family an attacker can use
 * (IPv4-mapped/compatible/translated, NAT64, 6to4, Teredo, and the URL spellings decimal/octal/hex/short/…).
 * Node's own `net.BlockList` and `net.isIP` serve as independent references for random addresses.
 */
import { BlockList, isIP } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  checkAddress,
  checkUrlShape,
  embeddedIPv4,
  formatIPv4,
  HARD_DENY,
  InvalidNetworkError,
  IPV4_SPECIAL,
  IPV6_SPECIAL_IN_GLOBAL,
  IPV6_SPECIAL_OUTSIDE_GLOBAL,
  isBlockedAddress,
  networkPolicy,
  parseAllowNetworks,
  parseIp,
} from './address-policy.ts';

// --- helpers -------------------------------------------------------------------------------------------------

const v4ToInt = (a: string) => a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
const intToV4 = (n: number) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
const hex16 = (n: number) => n.toString(16);
/** The IPv4 as two IPv6 groups: 127.0.0.1 → "7f00:1". */
const v4Groups = (a: string, xor = 0) => {
  const n = (v4ToInt(a) ^ xor) >>> 0;
  return `${hex16(Math.floor(n / 65536))}:${hex16(n % 65536)}`;
};
const v6ToBig = (text: string) => {
  const b = parseIp(text)!.bytes;
  return b.reduce((n, x) => (n << 8n) | BigInt(x), 0n);
};
const bigToV6 = (n: bigint) =>
  Array.from({ length: 8 }, (_, i) => ((n >> BigInt(112 - 16 * i)) & 0xffffn).toString(16)).join(':');

function v4Samples(cidr: string): string[] {
  const [base, len] = cidr.split('/') as [string, string];
  const first = v4ToInt(base);
  const size = 2 ** (32 - Number(len));
  return [...new Set([first, first + Math.floor(size / 2), first + size - 1])].map(intToV4);
}
function v6Samples(cidr: string): string[] {
  const [base, len] = cidr.split('/') as [string, string];
  const first = v6ToBig(base);
  const size = 1n << BigInt(128 - Number(len));
  return [...new Set([first, first + size / 2n, first + size - 1n])].map(bigToV6);
}

/** Every way an IPv6 address can carry an IPv4 one. */
const V6_CARRIERS: Record<string, (a: string) => string> = {
  'IPv4-mapped, dotted': (a) => `::ffff:${a}`,
  'IPv4-mapped, hex': (a) => `::ffff:${v4Groups(a)}`,
  'IPv4-mapped, uncompressed': (a) => `0:0:0:0:0:ffff:${v4Groups(a)}`,
  'IPv4-compatible': (a) => `::${a}`,
  'IPv4-translated': (a) => `::ffff:0:${a}`,
  NAT64: (a) => `64:ff9b::${a}`,
  'NAT64 local-use /48': (a) => {
    const [x, y, z, w] = a.split('.').map(Number) as [number, number, number, number];
    return `64:ff9b:1:${hex16(x * 256 + y)}:${hex16(z)}:${hex16(w * 256)}::`;
  },
  '6to4': (a) => `2002:${v4Groups(a)}::1`,
  'Teredo client (obfuscated)': (a) => `2001:0:4136:e378:8000:63bf:${v4Groups(a, 0xffffffff)}`,
  'Teredo server': (a) => `2001:0:${v4Groups(a)}:8000:63bf:3fff:fdd2`,
};

/** Every non-canonical way to type an IPv4 in a URL host; WHATWG turns each into the dotted quad. */
const URL_SPELLINGS: Record<string, (a: string) => string> = {
  decimal: (a) => String(v4ToInt(a)),
  'octal octets': (a) =>
    a
      .split('.')
      .map((o) => `0${Number(o).toString(8)}`)
      .join('.'),
  'hex octets': (a) =>
    a
      .split('.')
      .map((o) => `0x${Number(o).toString(16)}`)
      .join('.'),
  'hex whole': (a) => `0x${v4ToInt(a).toString(16)}`,
  'short a.b': (a) => {
    const [x, ...rest] = a.split('.');
    return `${x}.${v4ToInt(`0.${rest.join('.')}`)}`;
  },
  'short a.b.c': (a) => {
    const [x, y, z, w] = a.split('.').map(Number) as [number, number, number, number];
    return `${x}.${y}.${z * 256 + w}`;
  },
  'trailing dot': (a) => `${a}.`,
  'zero-padded': (a) => a.replace(/^(\d+)/, '0$1'),
  'percent-encoded dots': (a) => a.replaceAll('.', '%2E'),
  'full-width digits': (a) => a.replace(/\d/g, (d) => String.fromCharCode(0xff10 + Number(d))),
  'ideographic full stops': (a) => a.replaceAll('.', '\u3002'),
};

/** URL → blocked? The composition the destination checker and the sender use: shape, then the IP literal. */
function urlRefused(raw: string, allow = parseAllowNetworks([])): boolean {
  const shape = checkUrlShape(raw, { httpsOnly: false });
  if (!shape.ok) return true;
  return shape.hostKind !== 'name' && isBlockedAddress(shape.hostname, allow);
}

// --- generated tables ----------------------------------------------------------------------------------------

const v4Rows = IPV4_SPECIAL.flatMap((r) =>
  v4Samples(r.cidr).map((ip) => ({ range: `${r.cidr} ${r.name}`, ip })),
);
const v6Rows = [...IPV6_SPECIAL_IN_GLOBAL, ...IPV6_SPECIAL_OUTSIDE_GLOBAL].flatMap((r) =>
  v6Samples(r.cidr).map((ip) => ({ range: `${r.cidr} ${r.name}`, ip })),
);

describe('IPv4 special-purpose ranges (first, middle, last)', () => {
  it.each(v4Rows)('$ip ($range) is blocked', ({ ip }) => {
    expect(isBlockedAddress(ip)).toBe(true);
  });

  const carried = v4Rows.flatMap((row) =>
    Object.entries(V6_CARRIERS).map(([form, f]) => ({ ...row, form, v6: f(row.ip) })),
  );
  it.each(carried)('$ip as $form ($v6) is blocked', ({ v6 }) => {
    expect(parseIp(v6)?.family).toBe(6);
    expect(isBlockedAddress(v6)).toBe(true);
  });

  const spelled = v4Rows.flatMap((row) =>
    Object.entries(URL_SPELLINGS).map(([form, f]) => ({
      ...row,
      form,
      url: `http://${f(row.ip)}:8080/hook`,
    })),
  );
  it.each(spelled)('$ip spelled $form ($url) is refused', ({ url }) => {
    expect(checkUrlShape(url, { httpsOnly: false }).ok).toBe(false);
  });

  it.each(v4Rows)('$ip as a canonical URL literal and as a bracketed mapped literal is refused', ({ ip }) => {
    expect(checkUrlShape(`http://${ip}/`, { httpsOnly: false })).toMatchObject({
      ok: true,
      hostKind: 'ipv4',
    });
    expect(urlRefused(`http://${ip}/`)).toBe(true);
    expect(urlRefused(`https://[::ffff:${ip}]:8443/`)).toBe(true);
    expect(urlRefused(`https://[64:ff9b::${ip}]/`)).toBe(true);
  });

  it.each(v4Rows)('$ip is allowed when its range is allowed, in IPv4 and IPv4-mapped form only', ({ ip }) => {
    const allow = parseAllowNetworks(IPV4_SPECIAL.filter((r) => inV4(ip, r.cidr)).map((r) => r.cidr));
    const hard = HARD_DENY.some((r) => r.cidr === `${ip}/32`);
    expect(isBlockedAddress(ip, allow)).toBe(hard);
    expect(isBlockedAddress(`::ffff:${ip}`, allow)).toBe(hard);
    // The allow-list names IPv4 networks; the NAT64/6to4/Teredo prefixes themselves stay refused.
    expect(isBlockedAddress(`64:ff9b::${ip}`, allow)).toBe(true);
    expect(isBlockedAddress(`2002:${v4Groups(ip)}::1`, allow)).toBe(true);
    expect(isBlockedAddress(`::${ip}`, allow)).toBe(true);
  });
});

function inV4(ip: string, cidr: string): boolean {
  const [base, len] = cidr.split('/') as [string, string];
  const size = 2 ** (32 - Number(len));
  return v4ToInt(ip) >= v4ToInt(base) && v4ToInt(ip) < v4ToInt(base) + size;
}

describe('IPv6 special-purpose ranges (first, middle, last)', () => {
  it.each(v6Rows)('$ip ($range) is blocked', ({ ip }) => {
    expect(isBlockedAddress(ip)).toBe(true);
    expect(urlRefused(`https://[${ip}]/`)).toBe(true);
  });

  it.each([
    ['::1', '::1/128', false],
    ['fd12:3456::1', 'fc00::/7', false],
    ['fe80::1', 'fe80::/10', false],
    ['2001:db8::1', '2001:db8::/32', false],
    // Allowed prefix, public embedded IPv4: a NAT64 deployment can reach IPv4 destinations.
    ['64:ff9b::8.8.8.8', '64:ff9b::/96', false],
    // Allowed prefix, special embedded IPv4: still refused.
    ['64:ff9b::127.0.0.1', '64:ff9b::/96', true],
    ['64:ff9b::10.0.0.1', '64:ff9b::/96', true],
    ['2002:7f00:1::1', '2002::/16', true],
    ['2002:808:808::1', '2002::/16', false],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', '2001::/32', true], // client 127.0.0.1
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', '2001::/32', false], // client 8.8.8.8, server 65.54.227.120
    ['::ffff:10.1.2.3', '::/0', true], // allowing all IPv6 does not allow a mapped private IPv4
    ['::ffff:10.1.2.3', '10.0.0.0/8', false],
    ['fd00:ec2::254', 'fc00::/7', true], // metadata: never re-allowed
    ['169.254.169.254', '169.254.0.0/16', true],
    ['::ffff:169.254.169.254', '0.0.0.0/0', true],
    ['64:ff9b::a9fe:a9fe', '64:ff9b::/96', true], // NAT64 of metadata
    ['0.0.0.0', '0.0.0.0/8', true],
    ['::', '::/0', true],
    ['100.100.100.200', '100.64.0.0/10', true],
  ])('%s with allow %s → blocked %s', (ip, cidr, blocked) => {
    expect(isBlockedAddress(ip, parseAllowNetworks([cidr]))).toBe(blocked);
  });

  it('allows only 2000::/3: unallocated space outside it is refused', () => {
    for (const ip of ['4000::1', '4::1', '1::1', '8000::1', 'e000::1', 'c000::1', '1000::']) {
      expect(checkAddress(ip)).toEqual({ blocked: true, reason: 'not global unicast' });
    }
    expect(checkAddress('::2')).toEqual({ blocked: true, reason: 'IPv4-compatible (deprecated)' });
  });
});

describe('embedded IPv4 decoding', () => {
  it('decodes the RFC 4380 Teredo example (server 65.54.227.120, client 192.0.2.45 obfuscated)', () => {
    const got = embeddedIPv4(parseIp('2001:0:4136:e378:8000:63bf:3fff:fdd2')!);
    expect(got.map((e) => [e.form, formatIPv4(e.address.bytes)])).toEqual([
      ['teredo-server', '65.54.227.120'],
      ['teredo-client', '192.0.2.45'],
    ]);
  });

  it.each(Object.entries(V6_CARRIERS))('round-trips %s', (_form, f) => {
    for (const v4 of ['127.0.0.1', '8.8.8.8', '10.200.3.4', '255.255.255.254']) {
      const found = embeddedIPv4(parseIp(f(v4))!).map((e) => formatIPv4(e.address.bytes));
      expect(found).toContain(v4);
    }
  });

  it('does not treat :: and ::1 as IPv4-compatible carriers', () => {
    expect(embeddedIPv4(parseIp('::')!)).toEqual([]);
    expect(embeddedIPv4(parseIp('::1')!)).toEqual([]);
    expect(embeddedIPv4(parseIp('2606:4700::1111')!)).toEqual([]);
  });
});

// --- public addresses and differential checks against node:net --------------------------------------------------

/** An independent reference: a second classifier written with node:net.BlockList. */
const reference = (() => {
  const deny = new BlockList();
  const v4 = ['0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12'];
  v4.push('192.0.0.0/24', '192.0.2.0/24', '192.31.196.0/24', '192.52.193.0/24', '192.88.99.0/24');
  v4.push('192.168.0.0/16', '192.175.48.0/24', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24');
  v4.push('224.0.0.0/4', '240.0.0.0/4', '168.63.129.16/32');
  for (const c of v4) deny.addSubnet(c.split('/')[0]!, Number(c.split('/')[1]), 'ipv4');
  for (const c of ['2001::/23', '2001:db8::/32', '2002::/16', '2620:4f:8000::/48', '3fff::/20']) {
    deny.addSubnet(c.split('/')[0]!, Number(c.split('/')[1]), 'ipv6');
  }
  const global = new BlockList();
  global.addSubnet('2000::', 3, 'ipv6');
  return (ip: string) =>
    isIP(ip) === 4 ? deny.check(ip, 'ipv4') : !global.check(ip, 'ipv6') || deny.check(ip, 'ipv6');
})();

/** A small deterministic PRNG (mulberry32) so failures reproduce. */
function prng(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('public addresses', () => {
  const PUBLIC = ['8.8.8.8', '1.1.1.1', '93.184.215.14', '140.82.112.3', '223.255.255.255', '1.0.0.0'];
  PUBLIC.push(
    '2606:4700::1111',
    '2a00:1450:4001:82b::200e',
    '2001:4860:4860::8888',
    '2c0f:fb50::1',
    '3ffe::1',
  );
  it.each(PUBLIC)('%s is allowed', (ip) => {
    expect(checkAddress(ip)).toEqual({ blocked: false, reason: 'public' });
  });

  // The neighbours just outside each IPv4 range: allowed unless another range holds them.
  const neighbours = IPV4_SPECIAL.flatMap((r) => {
    const [first, , last] = v4Samples(r.cidr).map(v4ToInt);
    return [first! - 1, (last ?? first!) + 1].filter((n) => n >= 0 && n < 2 ** 32).map(intToV4);
  });
  it.each(neighbours)('neighbour %s agrees with the reference classifier', (ip) => {
    expect(isBlockedAddress(ip)).toBe(reference(ip));
  });

  it('agrees with the reference on 20,000 random IPv4 and IPv6 addresses', () => {
    const rand = prng(42);
    const interesting = ['0', '20', '24', '26', '2a', '2c', '3f', '40', '64', '100', 'fc', 'fd', 'fe', 'ff'];
    for (let i = 0; i < 10_000; i++) {
      const v4 = intToV4(Math.floor(rand() * 2 ** 32));
      expect(isBlockedAddress(v4), v4).toBe(reference(v4));
      const groups = Array.from({ length: 8 }, () => Math.floor(rand() * 65536).toString(16));
      if (rand() < 0.5)
        groups[0] = `${interesting[Math.floor(rand() * interesting.length)]}${groups[0]!.slice(2)}`;
      if (rand() < 0.2) groups[0] = '2001';
      if (rand() < 0.1) groups.fill('0', 0, 5);
      const v6 = groups.join(':');
      expect(isBlockedAddress(v6), v6).toBe(reference(v6));
    }
  });
});

describe('strict parsing (differential against net.isIP)', () => {
  const cases = [
    '127.0.0.1',
    '0.0.0.0',
    '255.255.255.255',
    '256.0.0.1',
    '127.1',
    '0x7f.0.0.1',
    '0177.0.0.1',
    '01.2.3.4',
    '2130706433',
    ' 127.0.0.1',
    '127.0.0.1 ',
    '127.0.0.1.',
    '1.2.3.4.5',
    '::',
    '::1',
    '1::',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '1:2:3:4:5:6:7:8',
    '1:2:3:4:5:6:7::',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:1.2.3.4',
    '1:2:3:4:5:6:7:1.2.3.4',
    ':::',
    '1:::2',
    ':1::',
    '1::2::3',
    '12345::1',
    'g::1',
    '::ffff:256.0.0.1',
    '::1.2.3',
    'fe80::1%eth0',
    '[::1]',
    '',
    'example.com',
    '0000:0000:0000:0000:0000:0000:0000:0001',
    'FD00:EC2::254',
  ];
  it.each(cases)('%j', (text) => {
    const zone = text.includes('%'); // net.isIP accepts zone ids; the guard must not (no scoped destinations)
    expect(parseIp(text) !== null).toBe(zone ? false : isIP(text) !== 0);
    if (parseIp(text) === null) expect(isBlockedAddress(text)).toBe(true);
  });
});

describe('denied networks (HOOKRAIL_DENY_NETWORKS)', () => {
  const deny = parseAllowNetworks(['93.184.215.0/24', '2606:2800:220:1::/64'], 'denied networks');
  it('refuses public addresses in a denied network, naming it, and leaves the rest public', () => {
    expect(checkAddress('93.184.215.14', [], deny)).toEqual({
      blocked: true,
      reason: 'denied network (93.184.215.0/24)',
    });
    expect(checkAddress('2606:2800:220:1::248', [], deny)).toEqual({
      blocked: true,
      reason: 'denied network (2606:2800:220:1::/64)',
    });
    expect(checkAddress('93.184.216.34', [], deny)).toEqual({ blocked: false, reason: 'public' });
  });
  it('wins over an allowed network', () => {
    const allow = parseAllowNetworks(['127.0.0.0/8']);
    expect(checkAddress('127.0.0.5', allow, parseAllowNetworks(['127.0.0.5/32'])).blocked).toBe(true);
    expect(checkAddress('127.0.0.6', allow, parseAllowNetworks(['127.0.0.5/32'])).blocked).toBe(false);
  });
  it('takes an IPv4-mapped entry to deny its IPv4 network as well', () => {
    const policy = networkPolicy([], ['::ffff:8.8.8.8/128', '::ffff:9.9.0.0/112', '2001:4860::/32']);
    expect(checkAddress('8.8.8.8', policy.allow, policy.deny)).toEqual({
      blocked: true,
      reason: 'denied network (::ffff:8.8.8.8/128)',
    });
    expect(checkAddress('9.9.200.1', policy.allow, policy.deny).blocked).toBe(true);
    expect(checkAddress('9.10.0.1', policy.allow, policy.deny).blocked).toBe(false);
    expect(policy.deny).toHaveLength(5);
  });
  it('names its list when an entry is invalid', () => {
    expect(() => networkPolicy(['127.0.0.0/8'], ['10.0.0.0/33'])).toThrow(/^denied networks: /);
    expect(networkPolicy(['127.0.0.0/8'], ['10.1.2.3']).deny.map((n) => n.text)).toEqual(['10.1.2.3']);
  });
});

describe('parseAllowNetworks', () => {
  it('accepts CIDRs and bare addresses, trimming and skipping blanks', () => {
    const nets = parseAllowNetworks([' 127.0.0.0/8', '::1/128', '10.1.2.3', '', 'fd00::/8']);
    expect(nets.map((n) => [n.text, n.prefix])).toEqual([
      ['127.0.0.0/8', 8],
      ['::1/128', 128],
      ['10.1.2.3', 32],
      ['fd00::/8', 8],
    ]);
  });
  it.each([
    '127.0.0.1/8',
    '10.0.0.0/33',
    '::1/129',
    '10.0.0.0/',
    '10.0.0.0/-1',
    '10.0.0.0/8/8',
    'localhost',
    '10/8',
    '0x7f.0.0.0/8',
    'fe80::/10%eth0',
  ])('rejects %j', (text) => {
    expect(() => parseAllowNetworks([text])).toThrow(InvalidNetworkError);
  });
  it('names every bad entry at once', () => {
    expect(() => parseAllowNetworks(['bad', '127.0.0.0/8', 'worse/1'])).toThrow(/"bad".*"worse\/1"/);
  });
});

describe('checkUrlShape', () => {
  it.each([
    ['https://hooks.example.com/webhooks?x=1#frag', 'https://hooks.example.com/webhooks?x=1#frag'],
    ['HTTPS://Hooks.Example.COM:443/a', 'https://hooks.example.com/a'],
    ['https://hooks.example.com.:8443/a', 'https://hooks.example.com:8443/a'],
    ['http://hooks.example.com:3000', 'http://hooks.example.com:3000/'],
    ['https://ñandú.example/', 'https://xn--and-6ma2c.example/'],
    ['https://8.8.8.8/x', 'https://8.8.8.8/x'],
    ['https://[2606:4700:0:0::1111]/', 'https://[2606:4700::1111]/'],
    ['https://under_score.example.com/', 'https://under_score.example.com/'],
  ])('accepts %s as %s', (raw, canonical) => {
    expect(checkUrlShape(raw, { httpsOnly: false })).toMatchObject({ ok: true, url: canonical });
  });

  it.each([
    ['ftp://example.com/', 'scheme_not_allowed'],
    ['file:///etc/passwd', 'scheme_not_allowed'],
    ['gopher://example.com/', 'scheme_not_allowed'],
    ['javascript://example.com/%0aalert(1)', 'scheme_not_allowed'],
    ['ws://example.com/', 'scheme_not_allowed'],
    ['https:/127.0.0.1/', 'invalid_url'],
    ['https:127.0.0.1', 'invalid_url'],
    ['//example.com/', 'invalid_url'],
    ['example.com/hook', 'invalid_url'],
    ['https://user:pw@example.com/', 'credentials_not_allowed'],
    ['https://user@example.com/', 'credentials_not_allowed'],
    ['https://example.com@127.0.0.1/', 'credentials_not_allowed'],
    ['https://public.example\\@127.0.0.1/', 'invalid_url'],
    ['https://example.com\\.evil.com/', 'invalid_url'],
    [' https://example.com/', 'invalid_url'],
    ['https://example.com/ ', 'invalid_url'],
    ['https://exa\tmple.com/', 'invalid_url'],
    ['https://127.\n0.0.1/', 'invalid_url'],
    ['https://example.com/\r\nX-Injected: 1', 'invalid_url'],
    ['https://exam\u0000ple.com/', 'invalid_url'],
    ['https://example.com\u00a0/', 'invalid_url'],
    ['https://exa\u200bmple.com/', 'invalid_url'],
    ['https://example.com:0/', 'invalid_url'],
    ['https://example.com:65536/', 'invalid_url'],
    ['https://ex%61mple.com/', 'invalid_url'],
    ['https://example..com/', 'invalid_url'],
    ['https://example.com../', 'invalid_url'],
    ['https://-example.com/', 'invalid_url'],
    ['https://[fe80::1%25eth0]/', 'invalid_url'],
    [`https://example.com/${'a'.repeat(2048)}`, 'invalid_url'],
    ['https://localhost/', 'destination_not_allowed'],
    ['https://LOCALHOST./', 'destination_not_allowed'],
    ['https://ｌｏｃａｌｈｏｓｔ/', 'destination_not_allowed'],
    ['https://api.localhost/', 'destination_not_allowed'],
    ['https://localhost.localdomain/', 'destination_not_allowed'],
    ['https://ip6-localhost/', 'destination_not_allowed'],
    ['https://printer.local/', 'destination_not_allowed'],
    ['https://redis.default.svc.cluster.local/', 'destination_not_allowed'],
    ['https://kubernetes.default.svc/', 'destination_not_allowed'],
    ['https://metadata.google.internal/computeMetadata/v1/', 'destination_not_allowed'],
    ['https://host.docker.internal/', 'destination_not_allowed'],
    ['https://router.home.arpa/', 'destination_not_allowed'],
    ['https://1.0.0.127.in-addr.arpa/', 'destination_not_allowed'],
    ['https://nas.lan/', 'destination_not_allowed'],
    ['https://metadata/', 'destination_not_allowed'],
    ['https://intranet/', 'destination_not_allowed'],
    ['https://instance-data/', 'destination_not_allowed'],
  ])('rejects %j (%s)', (raw, reason) => {
    expect(checkUrlShape(raw, { httpsOnly: false })).toMatchObject({ ok: false, reason });
  });

  it('enforces https when asked', () => {
    expect(checkUrlShape('http://example.com/', { httpsOnly: true })).toEqual({
      ok: false,
      reason: 'scheme_not_allowed',
      message: 'URL must use https',
    });
    expect(checkUrlShape('https://example.com/', { httpsOnly: true }).ok).toBe(true);
  });

  it('never echoes an address in its messages', () => {
    for (const raw of ['http://2130706433/', 'http://localhost/', 'http://10.0.0.1@x.com/']) {
      const r = checkUrlShape(raw, { httpsOnly: false });
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.message).not.toMatch(/\d+\.\d+|localhost|2130706433/);
    }
  });
});
