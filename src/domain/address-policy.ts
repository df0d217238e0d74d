/**
 * The address guard's decisions (PRODUCT.md §7, ADR-11/12; operator view in docs/security.md), pure and
 * dependency-free so that the domain imports nothing but itself (scripts/check-boundaries.ts). The HTTP adapter
 * calls `checkAddress` (with the operator's allowed and denied networks) on every address it is about to dial;
 * `checkUrlShape` is the URL policy applied at registration, on every delivery and on every redirect hop.
 *
 * Policy: "public internet only". IPv4: everything except the IANA special-purpose blocks, multicast, class E and
 * a few provider-internal addresses. IPv6: only 2000::/3 (global unicast) minus the special blocks inside it — so
 * loopback, unspecified, IPv4-mapped/compatible/translated, NAT64, unique-local, link-local, site-local, multicast
 * and unallocated space are all refused without being listed one by one. Operators re-allow ranges explicitly
 * (HOOKRAIL_ALLOW_NETWORKS), except the metadata/credential addresses in HARD_DENY, which nothing re-allows.
 *
 * Addresses that embed an IPv4 (mapped, compatible, translated, NAT64, 6to4, Teredo) are refused as prefixes.
 * Their embedded IPv4 is decoded as well: an allow-listed prefix (say 64:ff9b::/96 for a NAT64 deployment) still
 * refuses an embedded address that is itself special, and an IPv4-mapped address is the IPv4 address as far as the
 * kernel is concerned, so the IPv4 allow-list applies to it.
 *
 * Parsers are strict on purpose: only dotted-quad IPv4 without leading zeros and RFC 4291 IPv6 text without zone
 * ids. Anything else (`0x7f.1`, `127.1`, `fe80::1%eth0`) is "not an address" and therefore blocked — never fed to
 * a lenient parser that might read it differently from the kernel.
 */

export type IpFamily = 4 | 6;

export interface IpAddress {
  readonly family: IpFamily;
  /** 4 or 16 bytes, network order. */
  readonly bytes: Uint8Array;
}

export interface Network extends IpAddress {
  readonly prefix: number;
  /** The CIDR as written in the configuration. */
  readonly text: string;
}

export class InvalidNetworkError extends Error {}

/** The operator's additions to the policy: ranges opened (HOOKRAIL_ALLOW_NETWORKS) and closed (…_DENY_NETWORKS). */
export interface NetworkPolicy {
  readonly allow: readonly Network[];
  readonly deny: readonly Network[];
}

/**
 * Both lists parsed; an invalid entry in either throws InvalidNetworkError naming its list. A denied network written
 * in IPv4-mapped form (`::ffff:203.0.113.7/128`, as logs may show an address) also denies that IPv4 network: a
 * mapped address is refused anyway, so the entry can only have meant the IPv4 one.
 */
export const networkPolicy = (allow: readonly string[] = [], deny: readonly string[] = []): NetworkPolicy => {
  const denied = parseAllowNetworks(deny, 'denied networks');
  return {
    allow: parseAllowNetworks(allow),
    deny: [...denied, ...denied.flatMap((n) => mappedIPv4Network(n) ?? [])],
  };
};

/** The IPv4 network an IPv4-mapped IPv6 network (::ffff:0:0/96 and longer) stands for; null for any other. */
function mappedIPv4Network(n: Network): Network | null {
  if (n.family !== 6 || n.prefix < 96) return null;
  for (let i = 0; i < 10; i++) if (n.bytes[i] !== 0) return null;
  if (n.bytes[10] !== 0xff || n.bytes[11] !== 0xff) return null;
  return { family: 4, bytes: n.bytes.slice(12), prefix: n.prefix - 96, text: n.text };
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------------------------

const V4_OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const V4_RE = new RegExp(`^${V4_OCTET}(?:\\.${V4_OCTET}){3}$`);
const V6_GROUP_RE = /^[0-9a-fA-F]{1,4}$/;

export function parseIPv4(text: string): Uint8Array | null {
  if (!V4_RE.test(text)) return null;
  return Uint8Array.from(text.split('.'), Number);
}

export function parseIPv6(text: string): Uint8Array | null {
  if (text.length > 45 || !/^[0-9a-fA-F:.]+$/.test(text)) return null;
  let head = text;
  let tail: number[] = [];
  if (text.includes('.')) {
    // A trailing dotted quad stands for the last two groups (`::ffff:1.2.3.4`).
    const lastColon = text.lastIndexOf(':');
    const v4 = lastColon < 0 ? null : parseIPv4(text.slice(lastColon + 1));
    if (!v4) return null;
    tail = [(v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!];
    head = text.slice(0, lastColon + 1);
    if (!head.endsWith('::')) head = head.slice(0, -1);
  }
  const halves = head.split('::');
  if (halves.length > 2) return null;
  const groupsOf = (s: string): number[] =>
    s === '' ? [] : s.split(':').map((g) => (V6_GROUP_RE.test(g) ? Number.parseInt(g, 16) : Number.NaN));
  let groups: number[];
  if (halves.length === 1) {
    groups = [...groupsOf(head), ...tail];
    if (groups.length !== 8) return null;
  } else {
    const left = groupsOf(halves[0]!);
    const right = [...groupsOf(halves[1]!), ...tail];
    const missing = 8 - left.length - right.length;
    if (missing < 1) return null;
    groups = [...left, ...new Array<number>(missing).fill(0), ...right];
  }
  if (groups.some(Number.isNaN)) return null;
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  });
  return bytes;
}

export function parseIp(text: string): IpAddress | null {
  const v4 = parseIPv4(text);
  if (v4) return { family: 4, bytes: v4 };
  const v6 = parseIPv6(text);
  return v6 ? { family: 6, bytes: v6 } : null;
}

export function formatIPv4(bytes: Uint8Array): string {
  return Array.from(bytes.subarray(0, 4)).join('.');
}

function inNetwork(addr: IpAddress, net: Network): boolean {
  if (addr.family !== net.family) return false;
  const full = net.prefix >> 3;
  for (let i = 0; i < full; i++) if (addr.bytes[i] !== net.bytes[i]) return false;
  const rest = net.prefix & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (addr.bytes[full]! & mask) === (net.bytes[full]! & mask);
}

/** `a.b.c.d/n` or `x::y/n`; a bare address means a single host. Host bits must be zero (`127.0.0.1/8` is a typo). */
export function parseCidr(text: string): Network {
  const [ip = '', prefixText, extra] = text.split('/');
  const addr = parseIp(ip);
  if (!addr || extra !== undefined) throw new InvalidNetworkError(`"${text}" is not an IP network (CIDR)`);
  const max = addr.family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : -1;
  if (prefix < 0 || prefix > max) throw new InvalidNetworkError(`"${text}" has an invalid prefix length`);
  const net: Network = { ...addr, prefix, text };
  const zeroed = { ...addr, bytes: addr.bytes.map((b, i) => maskByte(b, i, prefix)) };
  if (zeroed.bytes.some((b, i) => b !== addr.bytes[i])) {
    throw new InvalidNetworkError(`"${text}" has host bits set; write the network address`);
  }
  return net;
}

function maskByte(b: number, index: number, prefix: number): number {
  const bits = Math.max(0, Math.min(8, prefix - index * 8));
  return b & ((0xff << (8 - bits)) & 0xff);
}

/** HOOKRAIL_ALLOW_NETWORKS entries → networks; throws InvalidNetworkError naming every bad entry. */
export function parseAllowNetworks(list: readonly string[], what = 'allowed networks'): Network[] {
  const out: Network[] = [];
  const errors: string[] = [];
  for (const raw of list) {
    const text = raw.trim();
    if (text === '') continue;
    try {
      out.push(parseCidr(text));
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  if (errors.length > 0) throw new InvalidNetworkError(`${what}: ${errors.join('; ')}`);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Ranges
// ---------------------------------------------------------------------------------------------------------------

export interface SpecialRange {
  readonly cidr: string;
  readonly name: string;
}

/** IANA IPv4 Special-Purpose Address Registry, plus multicast and provider-internal addresses. */
export const IPV4_SPECIAL: readonly SpecialRange[] = [
  { cidr: '0.0.0.0/8', name: 'this network' },
  { cidr: '10.0.0.0/8', name: 'private' },
  { cidr: '100.64.0.0/10', name: 'shared address space (CGNAT)' },
  { cidr: '127.0.0.0/8', name: 'loopback' },
  { cidr: '169.254.0.0/16', name: 'link-local' },
  { cidr: '172.16.0.0/12', name: 'private' },
  { cidr: '192.0.0.0/24', name: 'IETF protocol assignments' },
  { cidr: '192.0.2.0/24', name: 'documentation (TEST-NET-1)' },
  { cidr: '192.31.196.0/24', name: 'AS112-v4' },
  { cidr: '192.52.193.0/24', name: 'AMT' },
  { cidr: '192.88.99.0/24', name: 'deprecated 6to4 relay anycast' },
  { cidr: '192.168.0.0/16', name: 'private' },
  { cidr: '192.175.48.0/24', name: 'AS112 direct delegation' },
  { cidr: '198.18.0.0/15', name: 'benchmarking' },
  { cidr: '198.51.100.0/24', name: 'documentation (TEST-NET-2)' },
  { cidr: '203.0.113.0/24', name: 'documentation (TEST-NET-3)' },
  { cidr: '224.0.0.0/4', name: 'multicast' },
  { cidr: '240.0.0.0/4', name: 'reserved (class E, incl. broadcast)' },
  // Public-looking but platform-internal: Azure WireServer / host agent.
  { cidr: '168.63.129.16/32', name: 'provider internal (Azure WireServer)' },
];

/** Special blocks inside 2000::/3, the only IPv6 space that is allowed at all. */
export const IPV6_SPECIAL_IN_GLOBAL: readonly SpecialRange[] = [
  { cidr: '2001::/23', name: 'IETF protocol assignments' },
  { cidr: '2001::/32', name: 'Teredo' },
  { cidr: '2001:db8::/32', name: 'documentation' },
  { cidr: '2002::/16', name: '6to4' },
  { cidr: '2620:4f:8000::/48', name: 'AS112 direct delegation' },
  { cidr: '3fff::/20', name: 'documentation' },
];

/** Outside 2000::/3 and therefore refused anyway; named for log messages and so that tests cover each. */
export const IPV6_SPECIAL_OUTSIDE_GLOBAL: readonly SpecialRange[] = [
  { cidr: '::/128', name: 'unspecified' },
  { cidr: '::1/128', name: 'loopback' },
  { cidr: '::/96', name: 'IPv4-compatible (deprecated)' },
  { cidr: '::ffff:0:0/96', name: 'IPv4-mapped' },
  { cidr: '::ffff:0:0:0/96', name: 'IPv4-translated' },
  { cidr: '64:ff9b::/96', name: 'NAT64 well-known prefix' },
  { cidr: '64:ff9b:1::/48', name: 'NAT64 local use' },
  { cidr: '100::/64', name: 'discard-only' },
  { cidr: '100:0:0:1::/64', name: 'dummy prefix' },
  { cidr: '5f00::/16', name: 'SRv6 SIDs' },
  { cidr: 'fc00::/7', name: 'unique-local' },
  { cidr: 'fe80::/10', name: 'link-local' },
  { cidr: 'fec0::/10', name: 'site-local (deprecated)' },
  { cidr: 'ff00::/8', name: 'multicast' },
];

/**
 * Refused even when an allowed network covers them: cloud metadata and credential services (a webhook never
 * targets them, and a broad allow-list such as 169.254.0.0/16 or fc00::/7 must not expose them), and the
 * unspecified addresses, which Linux treats as "this host".
 */
export const HARD_DENY: readonly SpecialRange[] = [
  { cidr: '0.0.0.0/32', name: 'unspecified' },
  { cidr: '169.254.169.254/32', name: 'cloud metadata (AWS, GCP, Azure, OCI, DigitalOcean)' },
  { cidr: '169.254.170.2/32', name: 'AWS ECS task credentials' },
  { cidr: '169.254.170.23/32', name: 'AWS EKS pod identity' },
  { cidr: '100.100.100.200/32', name: 'Alibaba Cloud metadata' },
  { cidr: '168.63.129.16/32', name: 'Azure WireServer' },
  { cidr: '::/128', name: 'unspecified' },
  { cidr: 'fd00:ec2::254/128', name: 'AWS metadata (IPv6)' },
  { cidr: 'fd00:ec2::23/128', name: 'AWS EKS pod identity (IPv6)' },
];

interface CompiledRange extends SpecialRange {
  readonly net: Network;
}
const compile = (list: readonly SpecialRange[]): CompiledRange[] =>
  list.map((r) => ({ ...r, net: parseCidr(r.cidr) }));
const V4 = compile(IPV4_SPECIAL);
const V6_IN_GLOBAL = compile(IPV6_SPECIAL_IN_GLOBAL);
const V6_OUTSIDE = compile(IPV6_SPECIAL_OUTSIDE_GLOBAL);
const HARD = compile(HARD_DENY);
const GLOBAL_UNICAST = parseCidr('2000::/3');

/** The most specific named range containing `addr`, if any. */
function mostSpecific(addr: IpAddress, ranges: readonly CompiledRange[]): CompiledRange | undefined {
  let best: CompiledRange | undefined;
  for (const r of ranges) if (inNetwork(addr, r.net) && (!best || r.net.prefix > best.net.prefix)) best = r;
  return best;
}

/** Why `addr` is not public internet, or null when it is. */
function specialRangeOf(addr: IpAddress): string | null {
  if (addr.family === 4) return mostSpecific(addr, V4)?.name ?? null;
  if (!inNetwork(addr, GLOBAL_UNICAST)) return mostSpecific(addr, V6_OUTSIDE)?.name ?? 'not global unicast';
  return mostSpecific(addr, V6_IN_GLOBAL)?.name ?? null;
}

export interface EmbeddedIPv4 {
  readonly form:
    | 'mapped'
    | 'compatible'
    | 'translated'
    | 'nat64'
    | '6to4'
    | 'teredo-server'
    | 'teredo-client';
  readonly address: IpAddress;
}

const net6 = (cidr: string) => parseCidr(cidr);
const MAPPED = net6('::ffff:0:0/96');
const TRANSLATED = net6('::ffff:0:0:0/96');
const COMPATIBLE = net6('::/96');
const NAT64 = net6('64:ff9b::/96');
const NAT64_LOCAL = net6('64:ff9b:1::/48');
const SIX_TO_FOUR = net6('2002::/16');
const TEREDO = net6('2001::/32');

/** The IPv4 addresses an IPv6 address carries (RFC 4291, 6052, 6145, 3056, 4380). */
export function embeddedIPv4(addr: IpAddress): EmbeddedIPv4[] {
  if (addr.family !== 6) return [];
  const b = addr.bytes;
  const v4 = (...bytes: number[]): IpAddress => ({ family: 4, bytes: Uint8Array.from(bytes) });
  const last32 = () => v4(b[12]!, b[13]!, b[14]!, b[15]!);
  if (inNetwork(addr, MAPPED)) return [{ form: 'mapped', address: last32() }];
  if (inNetwork(addr, TRANSLATED)) return [{ form: 'translated', address: last32() }];
  if (inNetwork(addr, NAT64)) return [{ form: 'nat64', address: last32() }];
  // RFC 6052 /48 layout: the IPv4 is split around the reserved "u" octet (byte 8).
  if (inNetwork(addr, NAT64_LOCAL)) return [{ form: 'nat64', address: v4(b[6]!, b[7]!, b[9]!, b[10]!) }];
  if (inNetwork(addr, SIX_TO_FOUR)) return [{ form: '6to4', address: v4(b[2]!, b[3]!, b[4]!, b[5]!) }];
  if (inNetwork(addr, TEREDO)) {
    // The client address is stored bit-inverted ("obfuscated"), so that NATs do not rewrite it.
    return [
      { form: 'teredo-server', address: v4(b[4]!, b[5]!, b[6]!, b[7]!) },
      { form: 'teredo-client', address: v4(b[12]! ^ 0xff, b[13]! ^ 0xff, b[14]! ^ 0xff, b[15]! ^ 0xff) },
    ];
  }
  // ::/96 minus :: and ::1, which are not IPv4 carriers.
  if (inNetwork(addr, COMPATIBLE) && (b[12]! | b[13]! | b[14]! | (b[15]! & 0xfe)) !== 0) {
    return [{ form: 'compatible', address: last32() }];
  }
  return [];
}

export interface AddressVerdict {
  blocked: boolean;
  /** For operator logs only (it names the address class; tenants get "destination not allowed"). */
  reason: string;
}

/**
 * The decision for one address about to be dialled. Unparseable text is blocked. `allow` comes from
 * parseAllowNetworks (HOOKRAIL_ALLOW_NETWORKS).
 */
/**
 * Whether delivery may connect to `ip`. `allow` (HOOKRAIL_ALLOW_NETWORKS) opens special-purpose ranges; `deny`
 * (HOOKRAIL_DENY_NETWORKS) closes public ones — the operator's own ingress and egress addresses, so a tenant cannot
 * send requests from the trusted egress back into services that allow-list it (hairpin). Deny wins over allow, and
 * covers an address in any of its embedded IPv4 forms as the hard-denied ranges do.
 */
export function checkAddress(
  ip: string,
  allow: readonly Network[] = [],
  deny: readonly Network[] = [],
): AddressVerdict {
  const addr = parseIp(ip);
  if (!addr) return { blocked: true, reason: 'not an IP address' };
  const embedded = embeddedIPv4(addr);
  for (const a of [addr, ...embedded.map((e) => e.address)]) {
    const hard = mostSpecific(a, HARD);
    if (hard) return { blocked: true, reason: hard.name };
    const denied = deny.find((n) => inNetwork(a, n));
    if (denied) return { blocked: true, reason: `denied network (${denied.text})` };
  }
  const special = specialRangeOf(addr);
  if (special === null) return { blocked: false, reason: 'public' };
  const allowed = (a: IpAddress) => allow.some((n) => inNetwork(a, n));
  const mapped = embedded.find((e) => e.form === 'mapped');
  if (!allowed(addr) && !(mapped && allowed(mapped.address))) return { blocked: true, reason: special };
  for (const e of embedded) {
    const inner = specialRangeOf(e.address);
    if (inner !== null && !allowed(e.address)) return { blocked: true, reason: `${special} of ${inner}` };
  }
  return { blocked: false, reason: `allowed network (${special})` };
}

export function isBlockedAddress(ip: string, allow: readonly Network[] = []): boolean {
  return checkAddress(ip, allow).blocked;
}

// ---------------------------------------------------------------------------------------------------------------
// URL policy (L1): defence in depth and friendly errors; the connect-time address check is what decides.
// ---------------------------------------------------------------------------------------------------------------

export const MAX_URL_LENGTH = 2048;

export type UrlRejection =
  | 'invalid_url'
  | 'scheme_not_allowed'
  | 'credentials_not_allowed'
  | 'destination_not_allowed';

export type UrlShape =
  | {
      ok: true;
      /** Canonical (WHATWG-serialised) URL, without a trailing dot on the host name. */
      url: string;
      protocol: 'http:' | 'https:';
      /** Host without IPv6 brackets. */
      hostname: string;
      hostKind: 'ipv4' | 'ipv6' | 'name';
    }
  | { ok: false; reason: UrlRejection; message: string };

// C0/C1 controls, every Unicode space, zero-width characters and the backslash: WHATWG strips or reinterprets
// them (`http://127.\n0.0.1/` is 127.0.0.1; `\` is `/`), which is where parser differentials come from.
// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const FORBIDDEN_CHARS = /[\u0000-\u0020\u007f-\u009f\\\s\u200b-\u200d\u2060\ufeff]/u;
const SCHEME_AUTHORITY = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)/i;
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;
const INTERNAL_NAMES = new Set([
  'localhost',
  'localhost.localdomain',
  'ip6-localhost',
  'ip6-loopback',
  'metadata',
  'instance-data',
]);
// RFC 6761 (localhost), RFC 6762 (local and its appendix G private-use suggestions), ICANN's 2024 `internal`,
// RFC 8375 (home.arpa), reverse-DNS `arpa`, Kubernetes `svc`.
const INTERNAL_SUFFIXES = [
  'localhost',
  'local',
  'internal',
  'arpa',
  'svc',
  'lan',
  'home',
  'corp',
  'intranet',
  'private',
];

const reject = (reason: UrlRejection, message: string): UrlShape => ({ ok: false, reason, message });
const NOT_ALLOWED = 'destination not allowed';

/**
 * Checks the URL as typed and as parsed. Any port 1-65535 is accepted: endpoints legitimately listen on 8443,
 * 3000 and the like, and since only public addresses are ever dialled, a port rule would protect nothing that
 * the address rule does not (port 0 is refused: WHATWG accepts it, no server listens there).
 */
export function checkUrlShape(raw: string, opts: { httpsOnly: boolean }): UrlShape {
  const invalid = (why = 'URL is not valid') => reject('invalid_url', why);
  if (raw.length > MAX_URL_LENGTH) return invalid(`URL is longer than ${MAX_URL_LENGTH} characters`);
  if (FORBIDDEN_CHARS.test(raw)) return invalid('URL contains whitespace, control characters or a backslash');
  // `https:/host` and `https:host` parse to a host under WHATWG; require the authority form.
  const head = SCHEME_AUTHORITY.exec(raw);
  if (!head) return invalid();
  const scheme = head[1]!.toLowerCase();
  if (scheme !== 'https' && (scheme !== 'http' || opts.httpsOnly)) {
    return reject('scheme_not_allowed', opts.httpsOnly ? 'URL must use https' : 'URL must use http or https');
  }
  const authority = head[2]!;
  if (authority.includes('@')) return reject('credentials_not_allowed', 'URL must not contain credentials');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return invalid();
  }
  if (url.username !== '' || url.password !== '') {
    return reject('credentials_not_allowed', 'URL must not contain credentials');
  }
  if (url.port === '0') return invalid('port 0 is not valid');

  const typedHost = (authority.startsWith('[') ? authority.slice(0, authority.indexOf(']') + 1) : authority)
    .replace(/:\d*$/, '')
    .toLowerCase();
  if (typedHost.includes('%')) return invalid('host name must not be percent-encoded');

  if (url.hostname.startsWith('[')) {
    return accepted(url, url.hostname.slice(1, -1), 'ipv6');
  }
  if (parseIPv4(url.hostname)) {
    // WHATWG turned decimal, octal, hex, short, full-width and trailing-dot forms into a dotted quad; no customer
    // types those, and other parsers read some of them differently (`0127.0.0.1`).
    if (typedHost !== url.hostname) return invalid('write IP addresses in dotted-decimal form');
    return accepted(url, url.hostname, 'ipv4');
  }
  const name = url.hostname.endsWith('.') ? url.hostname.slice(0, -1) : url.hostname;
  const labels = name.split('.');
  if (name.length > 253 || !labels.every((l) => LABEL.test(l))) return invalid('host name is not valid');
  if (labels.length < 2 || INTERNAL_NAMES.has(name)) return reject('destination_not_allowed', NOT_ALLOWED);
  if (INTERNAL_SUFFIXES.includes(labels[labels.length - 1]!)) {
    return reject('destination_not_allowed', NOT_ALLOWED);
  }
  // A trailing dot is the same DNS name; dropping it keeps the Host header and TLS name conventional.
  if (name !== url.hostname) url.hostname = name;
  return accepted(url, name, 'name');
}

function accepted(url: URL, hostname: string, hostKind: 'ipv4' | 'ipv6' | 'name'): UrlShape {
  // The limit holds for the URL that is stored and sent, not only as typed: percent-encoding (`é` is `%C3%A9`) and
  // punycode make the canonical form longer.
  if (url.href.length > MAX_URL_LENGTH) {
    return reject('invalid_url', `URL is longer than ${MAX_URL_LENGTH} characters once encoded`);
  }
  return { ok: true, url: url.href, protocol: url.protocol as 'http:' | 'https:', hostname, hostKind };
}
