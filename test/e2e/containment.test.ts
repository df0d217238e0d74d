/**
 * Containment is topology (PRODUCT.md §7, ADR-12), demonstrated with Linux network namespaces: the real
 * UndiciSender, with the address guard deliberately DISABLED (allowNetworks 0.0.0.0/0 and ::/0), runs in a
 * namespace whose only way out is an egress gateway that routes to the "internet" and nowhere else. A public test
 * host is reachable; an internal service is not — by address, by a DNS answer pointing inward, or through a
 * redirect — and its connection count stays 0. A second delivery host that *does* have a route inward (a flat
 * network) is contained by the shipped nftables recipe (deploy/nftables/hookrail-delivery.nft) instead, which
 * still lets it reach its database. Finally the control plane, which sits on the internal network, reaches the
 * internal service, so the zero above is not a dead server.
 *
 *      dlv ──────┐                     ┌── pub   "public" test host 93.184.215.14, 2606:2800:21f:cb07:…
 *                gw (forwards, no route inward)
 *      fl ───────┘
 *       └──── int ──── ctl             internal service 10.213.8.10/10.213.9.10, fd00:213:…::10 (8080, "db" 5432)
 *
 * Nothing here touches the host's own network: the namespaces are linked only to each other, so no packet to the
 * public-looking addresses can leave the machine. Names are unique per run and everything is deleted afterwards.
 * Skipped, with the reason, when namespaces cannot be made (not Linux, not root, no iproute2, EPERM); the nftables
 * part is skipped when `nft` is not installed (Debian: nftables).
 */
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLES } from '../../src/config/config.ts';
import {
  HARD_DENY,
  IPV4_SPECIAL,
  IPV6_SPECIAL_IN_GLOBAL,
  type Network,
  parseCidr,
} from '../../src/domain/address-policy.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const HOST_SCRIPT = resolve(ROOT, 'test/support/netns-host.ts');
const NFT_RECIPE = resolve(ROOT, 'deploy/nftables/hookrail-delivery.nft');
const K8S_POLICIES = resolve(ROOT, 'deploy/kubernetes/30-network-policies.yaml');
const K8S_DELIVERY = resolve(ROOT, 'deploy/kubernetes/22-delivery.yaml');

const run = (cmd: string, args: string[]) => {
  try {
    return execFileSync(cmd, args, { stdio: 'pipe', encoding: 'utf8' });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')}: ${(e.stderr || e.message).trim()}`);
  }
};
const has = (cmd: string, args: string[]) => {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

/** Why namespaces cannot be used here, or null when they can (probed by making and deleting one). */
function namespaceSupport(): string | null {
  if (process.platform !== 'linux') return 'network namespaces are Linux-only';
  if (process.getuid?.() !== 0)
    return 'creating network namespaces needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)';
  if (!has('ip', ['-V'])) return '`ip` (iproute2) is not installed';
  const probe = `hrprobe${process.pid}`;
  try {
    run('ip', ['netns', 'add', probe]);
    run('ip', ['-n', probe, 'link', 'add', 'p0', 'type', 'veth', 'peer', 'name', 'p1']);
    return null;
  } catch (err) {
    return `cannot create a network namespace with a veth pair (${(err as Error).message})`;
  } finally {
    has('ip', ['netns', 'del', probe]);
  }
}

const unsupported = namespaceSupport();
const nftMissing = unsupported ? unsupported : has('nft', ['--version']) ? null : '`nft` is not installed';
const IPV6 = existsSync('/proc/sys/net/ipv6');
if (unsupported) console.warn(`containment test skipped: ${unsupported}`);
else if (nftMissing) console.warn(`containment test: nftables part skipped: ${nftMissing}`);

// Addresses. "Public" ones exist only inside these namespaces.
const PUB4 = '93.184.215.14';
const PUB6 = '2606:2800:21f:cb07:6820:80da:af6b:8b2c';
const INT4 = '10.213.9.10'; // internal service as seen by the control plane
const INT6 = 'fd00:213:9::10';
const FLAT_INT4 = '10.213.8.10'; // the same service on the flat network shared with `fl`
const FLAT_INT6 = 'fd00:213:8::10';
const FLAT_DNS4 = '10.213.8.53';
const HTTP_PORT = 8080;
const DB_PORT = 5432;
const url = (host: string, path = '/') =>
  `http://${host.includes(':') ? `[${host}]` : host}:${HTTP_PORT}${path}`;

interface HttpOutcome {
  url: string;
  ms?: number;
  status?: number;
  body?: string;
  errorClass?: string;
  message?: string;
}
interface SendOutput {
  http: HttpOutcome[];
  tcp: { target: string; ok: boolean; code: string | null }[];
}

describe.skipIf(unsupported !== null)('containment by network topology (Linux network namespaces)', () => {
  const id = `hr${randomBytes(3).toString('hex')}`;
  const ns = {
    dlv: `${id}-dlv`,
    fl: `${id}-fl`,
    gw: `${id}-gw`,
    pub: `${id}-pub`,
    int: `${id}-int`,
    ctl: `${id}-ctl`,
  };
  const created: string[] = [];
  const children: ChildProcessWithoutNullStreams[] = [];
  const hosts = {} as Record<'pub' | 'int' | 'dlv' | 'fl' | 'ctl', Host>;

  const exec = (name: string, cmd: string) => run('ip', ['netns', 'exec', name, 'sh', '-c', cmd]);

  /** A veth pair between two namespaces, with addresses (nodad: usable at once, no duplicate detection wait). */
  function link(a: string, aIf: string, aAddrs: string[], b: string, bIf: string, bAddrs: string[]) {
    run('ip', ['link', 'add', aIf, 'netns', a, 'type', 'veth', 'peer', 'name', bIf, 'netns', b]);
    for (const [n, dev, addrs] of [
      [a, aIf, aAddrs],
      [b, bIf, bAddrs],
    ] as const) {
      for (const addr of addrs) {
        if (addr.includes(':') && !IPV6) continue;
        run('ip', ['-n', n, 'addr', 'add', addr, 'dev', dev, ...(addr.includes(':') ? ['nodad'] : [])]);
      }
      run('ip', ['-n', n, 'link', 'set', dev, 'up']);
    }
  }
  function defaultRoute(n: string, via4: string, via6: string) {
    run('ip', ['-n', n, 'route', 'add', 'default', 'via', via4]);
    if (IPV6) run('ip', ['-n', n, '-6', 'route', 'add', 'default', 'via', via6]);
  }

  interface Host {
    send(targets: { http?: string[]; tcp?: string[]; hosts?: Record<string, string[]> }): Promise<SendOutput>;
    report(): Promise<Record<string, number>>;
  }

  /** test/support/netns-host.ts inside namespace `n`: optionally serving `ports`, answering commands in order. */
  async function start(n: string, label: string, ports: number[] = []): Promise<Host> {
    const args = [
      'netns',
      'exec',
      n,
      process.execPath,
      '--import',
      'tsx',
      HOST_SCRIPT,
      label,
      ports.join(','),
    ];
    const child = spawn('ip', args, { cwd: ROOT });
    children.push(child);
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const waiting: ((line: unknown) => void)[] = [];
    createInterface({ input: child.stdout }).on('line', (line) => waiting.shift()?.(JSON.parse(line)));
    const next = <T>(what: string, timeoutMs: number) =>
      new Promise<T>((ok, fail) => {
        const timer = setTimeout(
          () => fail(new Error(`${label}: no answer to ${what}; stderr: ${stderr}`)),
          timeoutMs,
        );
        waiting.push((msg) => {
          clearTimeout(timer);
          ok(msg as T);
        });
      });
    const command = <T>(cmd: object) => {
      const answer = next<T>(JSON.stringify(cmd), 30_000);
      child.stdin.write(`${JSON.stringify(cmd)}\n`);
      return answer;
    };
    expect(await next<{ event: string }>('start', 20_000)).toEqual({ event: 'ready' });
    return {
      send: (targets) => command<SendOutput>({ op: 'send', ...targets }),
      report: async () =>
        (await command<{ connections: Record<string, number> }>({ op: 'report' })).connections,
    };
  }

  beforeAll(async () => {
    for (const n of Object.values(ns)) {
      run('ip', ['netns', 'add', n]);
      created.push(n);
      run('ip', ['-n', n, 'link', 'set', 'lo', 'up']);
    }
    // The egress gateway: forwards between the delivery hosts and the internet; knows no internal network.
    // Unreachable messages unthrottled, so every refused connect fails at once (ENETUNREACH) rather than some
    // waiting out the connect timeout once the kernel's ICMP rate limit (about one a second) kicks in.
    exec(ns.gw, 'echo 1 > /proc/sys/net/ipv4/ip_forward; echo 0 > /proc/sys/net/ipv4/icmp_ratelimit');
    if (IPV6)
      exec(
        ns.gw,
        'echo 1 > /proc/sys/net/ipv6/conf/all/forwarding; echo 0 > /proc/sys/net/ipv6/icmp/ratelimit',
      );
    link(ns.gw, `${id}g0`, ['93.184.215.1/24', '2606:2800:21f:cb07::1/64'], ns.pub, `${id}p0`, [
      `${PUB4}/24`,
      `${PUB6}/64`,
    ]);
    defaultRoute(ns.pub, '93.184.215.1', '2606:2800:21f:cb07::1');
    // dlv: contained by routing — its one route leads to the gateway.
    link(ns.dlv, `${id}d0`, ['10.213.1.2/30', 'fd00:213:1::2/64'], ns.gw, `${id}g1`, [
      '10.213.1.1/30',
      'fd00:213:1::1/64',
    ]);
    defaultRoute(ns.dlv, '10.213.1.1', 'fd00:213:1::1');
    // fl: a delivery host on a flat network — a route to the gateway AND a link into the internal network.
    link(ns.fl, `${id}f0`, ['10.213.2.2/30', 'fd00:213:2::2/64'], ns.gw, `${id}g2`, [
      '10.213.2.1/30',
      'fd00:213:2::1/64',
    ]);
    defaultRoute(ns.fl, '10.213.2.1', 'fd00:213:2::1');
    link(ns.fl, `${id}f1`, ['10.213.8.2/24', 'fd00:213:8::2/64'], ns.int, `${id}i1`, [
      `${FLAT_INT4}/24`,
      `${FLAT_INT6}/64`,
    ]);
    // ctl: the control plane on the internal network.
    link(ns.ctl, `${id}c0`, ['10.213.9.1/24', 'fd00:213:9::1/64'], ns.int, `${id}i0`, [
      `${INT4}/24`,
      `${INT6}/64`,
    ]);

    const started = await Promise.all([
      start(ns.pub, 'public', [HTTP_PORT]),
      start(ns.int, 'internal', [HTTP_PORT, DB_PORT]),
      start(ns.dlv, 'delivery'),
      start(ns.fl, 'flat-delivery'),
      start(ns.ctl, 'control'),
    ]);
    [hosts.pub, hosts.int, hosts.dlv, hosts.fl, hosts.ctl] = started;
  }, 60_000);

  afterAll(async () => {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((done) => {
            if (c.exitCode !== null || c.signalCode !== null) return done();
            const timer = setTimeout(() => c.kill('SIGKILL'), 3_000);
            c.once('exit', () => {
              clearTimeout(timer);
              done();
            });
            c.stdin.end();
          }),
      ),
    );
    for (const n of created.reverse()) has('ip', ['netns', 'del', n]);
    const left = run('ip', ['netns', 'list']);
    expect(left).not.toContain(id);
  });

  it('the delivery namespace reaches the public test host (IPv4, IPv6, by name)', async () => {
    const out = await hosts.dlv.send({
      http: [url(PUB4), ...(IPV6 ? [url(PUB6)] : []), 'http://hooks.example.com:8080/'],
      hosts: { 'hooks.example.com': [PUB4] },
    });
    for (const r of out.http) expect(r, r.url).toMatchObject({ status: 200, body: 'public' });
  });

  it('with the guard disabled, the internal service is unreachable from the delivery namespace', async () => {
    const out = await hosts.dlv.send({
      http: [
        url(INT4),
        ...(IPV6 ? [url(INT6)] : []),
        // A DNS answer pointing inward (rebinding), and a public endpoint redirecting inward.
        'http://internal.example.com:8080/',
        url(PUB4, `/redirect?to=${encodeURIComponent(url(INT4))}`),
      ],
      tcp: [`${INT4}:${DB_PORT}`],
      hosts: { 'internal.example.com': [INT4] },
    });
    for (const r of out.http) {
      expect(r.status, `${r.url} answered`).toBeUndefined();
      expect(r.errorClass, r.url).toMatch(/^(network|connect_timeout|redirect_rejected)$/);
    }
    expect(out.tcp[0]).toMatchObject({ ok: false });
    expect(out.tcp[0]!.code).toMatch(/ENETUNREACH|EHOSTUNREACH|ETIMEDOUT/);
    expect(await hosts.int.report()).toEqual({ [HTTP_PORT]: 0, [DB_PORT]: 0 });
  });

  it.skipIf(nftMissing !== null)(
    'on a flat network, the nftables recipe contains the delivery host but lets it reach its database',
    async () => {
      run('ip', [
        'netns',
        'exec',
        ns.fl,
        'nft',
        '-D',
        `HOOKRAIL_DNS=${FLAT_DNS4}`,
        '-D',
        `HOOKRAIL_DB=${FLAT_INT4}`,
        '-D',
        `HOOKRAIL_DB_PORT=${DB_PORT}`,
        '-f',
        NFT_RECIPE,
      ]);
      const out = await hosts.fl.send({
        http: [
          url(PUB4),
          ...(IPV6 ? [url(PUB6)] : []),
          url(FLAT_INT4),
          ...(IPV6 ? [url(FLAT_INT6)] : []),
          'http://internal.example.com:8080/',
          url(PUB4, `/redirect?to=${encodeURIComponent(url(FLAT_INT4))}`),
        ],
        tcp: [`${FLAT_INT4}:${DB_PORT}`, `${FLAT_INT4}:${HTTP_PORT}`],
        hosts: { 'internal.example.com': [FLAT_INT4] },
      });
      const [pub4, ...rest] = out.http;
      const pub6 = IPV6 ? rest.shift() : undefined;
      expect(pub4).toMatchObject({ status: 200, body: 'public' });
      if (pub6) expect(pub6).toMatchObject({ status: 200, body: 'public' });
      for (const r of rest) {
        expect(r.status, `${r.url} answered`).toBeUndefined();
        expect(r.errorClass, r.url).toMatch(/^(network|connect_timeout|redirect_rejected)$/);
      }
      expect(out.tcp).toMatchObject([{ ok: true }, { ok: false }]);
      expect(await hosts.int.report()).toEqual({ [HTTP_PORT]: 0, [DB_PORT]: 1 });

      // The route inward is real: without the ruleset the same host connects.
      run('ip', ['netns', 'exec', ns.fl, 'nft', 'flush', 'ruleset']);
      const open = await hosts.fl.send({ tcp: [`${FLAT_INT4}:${HTTP_PORT}`] });
      expect(open.tcp).toMatchObject([{ ok: true }]);
      expect((await hosts.int.report())[HTTP_PORT]).toBe(1);
    },
  );

  it('the control plane reaches the internal service (it was up all along)', async () => {
    const before = (await hosts.int.report())[HTTP_PORT]!;
    const out = await hosts.ctl.send({ http: [url(INT4), ...(IPV6 ? [url(INT6)] : [])] });
    for (const r of out.http) expect(r, r.url).toMatchObject({ status: 200, body: 'internal' });
    expect((await hosts.int.report())[HTTP_PORT]).toBe(before + out.http.length);
  });
});

if (unsupported) {
  describe('containment by network topology', () => {
    it.skip(`skipped: ${unsupported}`, () => {});
  });
}

/** `inner` lies within `outer`. */
function within(inner: Network, outer: Network): boolean {
  if (inner.family !== outer.family || inner.prefix < outer.prefix) return false;
  for (let bit = 0; bit < outer.prefix; bit++) {
    const mask = 0x80 >> (bit & 7);
    if ((inner.bytes[bit >> 3]! & mask) !== (outer.bytes[bit >> 3]! & mask)) return false;
  }
  return true;
}
const cidrsIn = (text: string) =>
  [...text.matchAll(/(?<![\w:.])([0-9a-f]*[:.][0-9a-f:.]*\/\d{1,3})/gi)].map((m) => m[1]!);

describe('the deployment material agrees with the address guard', () => {
  const policies = readFileSync(K8S_POLICIES, 'utf8');
  const deliveryPolicy = policies.slice(policies.indexOf('name: hookrail-delivery-egress'));
  const nft = readFileSync(NFT_RECIPE, 'utf8');
  const nftSet = (name: string) =>
    nft.slice(nft.indexOf(`set ${name} {`), nft.indexOf('}', nft.indexOf(`set ${name} {`)));
  const excepted = {
    v4: cidrsIn(deliveryPolicy.slice(0, deliveryPolicy.indexOf('cidr: 2000::/3'))).filter(
      (c) => c !== '0.0.0.0/0',
    ),
    v6: cidrsIn(deliveryPolicy.slice(deliveryPolicy.indexOf('cidr: 2000::/3'))).filter(
      (c) => c !== '2000::/3',
    ),
  };
  const nftSets = { v4: cidrsIn(nftSet('internal_v4')), v6: cidrsIn(nftSet('special_v6')) };

  it.each([
    ['Kubernetes NetworkPolicy', excepted],
    ['nftables recipe', nftSets],
  ])('the %s leaves out every range the guard refuses', (_name, lists) => {
    const listed = [...lists.v4, ...lists.v6].map((c) => parseCidr(c));
    expect(lists.v4.length).toBeGreaterThan(10);
    const missing = [...IPV4_SPECIAL, ...IPV6_SPECIAL_IN_GLOBAL, ...HARD_DENY]
      .map((r) => r.cidr)
      // Outside 2000::/3 is refused by the policy's and the recipe's `2000::/3` rule as a whole.
      .filter((c) => !c.includes(':') || within(parseCidr(c), parseCidr('2000::/3')))
      .filter((c) => !listed.some((l) => within(parseCidr(c), l)));
    expect(missing).toEqual([]);
  });

  it('delivery pods accept no connections and carry no Kubernetes credentials', () => {
    expect(deliveryPolicy).toMatch(/policyTypes: \[Ingress, Egress\]\s+ingress: \[\]/);
    expect(nft).toMatch(/chain ingress \{\s+type filter hook input priority filter; policy drop;/);
    const deployment = readFileSync(K8S_DELIVERY, 'utf8');
    expect(deployment.match(/automountServiceAccountToken: false/g)).toHaveLength(2);
    expect(deployment).not.toMatch(/containerPort/);
  });

  it('the manifests run every role, and the roles that connect to customer URLs only under the egress policy', () => {
    const dir = resolve(ROOT, 'deploy/kubernetes');
    const deployments = readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .flatMap((f) => readFileSync(resolve(dir, f), 'utf8').split(/^---$/m))
      .filter((doc) => /^kind: Deployment$/m.test(doc))
      .map((doc) => ({
        component: doc.match(/app\.kubernetes\.io\/component: (\S+)/)?.[1],
        roles: doc.match(/args: \["start", "--roles", "([a-z,]+)"\]/)?.[1]?.split(',') ?? [],
      }));
    expect(deployments.length).toBeGreaterThanOrEqual(4);
    expect(new Set(deployments.flatMap((d) => d.roles))).toEqual(new Set(ROLES));
    // hookrail-delivery-egress selects component: delivery; nothing else in that component.
    expect(deliveryPolicy).toMatch(/app\.kubernetes\.io\/component: delivery/);
    for (const d of deployments) {
      const egress = d.roles.some((r) => r === 'delivery' || r === 'replay');
      expect({ ...d, egress }).toEqual({ ...d, egress: d.component === 'delivery' });
      if (egress) expect(d.roles.every((r) => r === 'delivery' || r === 'replay')).toBe(true);
    }
  });
});
