/**
 * Name resolution for the address guard that never waits on the libuv thread pool.
 *
 * `dns.lookup` (getaddrinfo) runs on that pool: four threads by default, shared with file I/O, crypto and zlib.
 * A name whose nameservers never answer holds a thread until the system resolver gives up (seconds, per try), and
 * a tenant can register many such names, so a few slow destinations would stall every other endpoint's lookups —
 * and the store's file work — behind them. c-ares (`dns.promises.Resolver`) asks the nameservers of
 * /etc/resolv.conf from the event loop instead, with a timeout of its own, so a slow name costs only its own
 * attempt.
 *
 * Names listed in the hosts file answer from it, as getaddrinfo does with the usual `hosts: files dns` order of
 * nsswitch.conf; the file is read once, when the resolver is made (a changed file takes a restart). Limits: no
 * search domains are applied (a name is asked as written: register fully qualified names), and no other
 * nsswitch source (mDNS, LDAP) is consulted.
 */

import { Resolver as AresResolver } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { Resolver } from './guarded-agent.ts';

export interface SystemResolverOptions {
  /** Default /etc/hosts; a file that cannot be read is taken as empty. */
  hostsFile?: string;
  /** Nameservers (`host` or `host:port`); default those of /etc/resolv.conf. */
  servers?: string[];
  /** c-ares's timeout for one query to one server, doubled on each retry. Default 1,500 ms. */
  timeoutMs?: number;
  /** Tries per server. Default 2. */
  tries?: number;
}

/** `name → addresses` from a hosts file's text: `address name [aliases…]`, `#` comments; names case-insensitive. */
export function parseHostsFile(text: string): Map<string, string[]> {
  const hosts = new Map<string, string[]>();
  for (const raw of text.split('\n')) {
    const [address, ...names] = (raw.split('#', 1)[0] ?? '').trim().split(/\s+/);
    if (!address || isIP(address) === 0) continue;
    for (const name of names) {
      const key = name.toLowerCase();
      const list = hosts.get(key);
      if (!list) hosts.set(key, [address]);
      else if (!list.includes(address)) list.push(address);
    }
  }
  return hosts;
}

export function createSystemResolver(opts: SystemResolverOptions = {}): Resolver {
  let text = '';
  try {
    text = readFileSync(opts.hostsFile ?? '/etc/hosts', 'utf8');
  } catch {
    // No hosts file: every name goes to the nameservers.
  }
  const hosts = parseHostsFile(text);
  const ares = new AresResolver({ timeout: opts.timeoutMs ?? 1_500, tries: opts.tries ?? 2 });
  if (opts.servers) ares.setServers(opts.servers);
  return {
    async resolve(host) {
      const name = (host.endsWith('.') ? host.slice(0, -1) : host).toLowerCase();
      const listed = hosts.get(name);
      if (listed) return [...listed];
      const [v4, v6] = await Promise.allSettled([ares.resolve4(name), ares.resolve6(name)]);
      const addresses = [
        ...(v4.status === 'fulfilled' ? v4.value : []),
        ...(v6.status === 'fulfilled' ? v6.value : []),
      ];
      // A name with only one family answers the other with ENODATA; only when neither answered is it an error
      // (ENOTFOUND, ETIMEOUT, ESERVFAIL …: the A query's reason, which the guard wraps as DnsResolutionError).
      if (addresses.length === 0 && v4.status === 'rejected') throw v4.reason;
      return addresses;
    },
  };
}

let shared: Resolver | null = null;

/** The process's one system resolver (one hosts-file read, one c-ares channel), made on first use. */
export const systemResolver = (): Resolver => {
  shared ??= createSystemResolver();
  return shared;
};
