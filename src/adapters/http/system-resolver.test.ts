/**
 * The system resolver against a real nameserver on a local UDP port (a few lines of DNS below: answers A and AAAA
 * for the names it is given, NXDOMAIN for others, and never answers names starting `slow.`), and a hosts file:
 * names from the file answer from it, others from the nameserver, both families, CNAME-free; a name whose
 * nameserver never answers fails on c-ares's own timeout while the libuv thread pool stays free for other work.
 */
import { pbkdf2 } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSystemResolver, parseHostsFile } from './system-resolver.ts';

const RECORDS: Record<string, { a?: number[][]; aaaa?: number[][] }> = {
  'both.test': { a: [[203, 0, 113, 7]], aaaa: [[0x20, 0x01, 0x0d, 0xb8, ...new Array(11).fill(0), 1]] },
  'v4only.test': {
    a: [
      [198, 51, 100, 1],
      [198, 51, 100, 2],
    ],
  },
};

/** The question's name (labels) and where the question ends. */
function question(msg: Buffer): { name: string; end: number; type: number } {
  const labels: string[] = [];
  let i = 12;
  while (msg[i]! > 0) {
    labels.push(msg.subarray(i + 1, i + 1 + msg[i]!).toString('latin1'));
    i += 1 + msg[i]!;
  }
  return { name: labels.join('.').toLowerCase(), end: i + 5, type: msg.readUInt16BE(i + 1) };
}

function answer(msg: Buffer): Buffer | null {
  const q = question(msg);
  if (q.name.startsWith('slow.')) return null;
  const known = RECORDS[q.name];
  const rdata = known ? ((q.type === 1 ? known.a : q.type === 28 ? known.aaaa : undefined) ?? []) : [];
  const header = Buffer.alloc(12);
  msg.copy(header, 0, 0, 2); // id
  header.writeUInt16BE(known ? 0x8180 : 0x8183, 2); // response, RD+RA; NXDOMAIN for unknown names
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(rdata.length, 6);
  const records = rdata.map((bytes) => {
    const rr = Buffer.alloc(12 + bytes.length);
    rr.writeUInt16BE(0xc00c, 0); // the question's name
    rr.writeUInt16BE(q.type, 2);
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(60, 6);
    rr.writeUInt16BE(bytes.length, 10);
    Buffer.from(bytes).copy(rr, 12);
    return rr;
  });
  return Buffer.concat([header, msg.subarray(12, q.end), ...records]);
}

describe('system resolver', () => {
  let server: Socket;
  let servers: string[];
  let hostsFile: string;

  beforeAll(async () => {
    server = createSocket('udp4');
    server.on('message', (msg, from) => {
      const reply = answer(msg);
      if (reply) server.send(reply, from.port, from.address);
    });
    await new Promise<void>((resolve) => server.bind(0, '127.0.0.1', resolve));
    servers = [`127.0.0.1:${server.address().port}`];
    hostsFile = join(mkdtempSync(join(tmpdir(), 'hookrail-hosts-')), 'hosts');
    writeFileSync(
      hostsFile,
      '# comment\n127.0.0.1 localhost\n10.1.2.3  Pinned.Test pinned-alias # trailing\n::1 localhost\nnot-an-ip bogus\n',
    );
  });
  afterAll(() => server.close());

  it('parses a hosts file: addresses per name, aliases, comments, case, lines without an address skipped', () => {
    const hosts = parseHostsFile(
      '127.0.0.1 localhost\n::1 localhost ip6-localhost\n#1.2.3.4 x\n10.0.0.1 A.b # c\nzz y\n',
    );
    expect(Object.fromEntries(hosts)).toEqual({
      localhost: ['127.0.0.1', '::1'],
      'ip6-localhost': ['::1'],
      'a.b': ['10.0.0.1'],
    });
  });

  it('answers names in the hosts file from it, others from the nameserver, both families', async () => {
    const r = createSystemResolver({ hostsFile, servers });
    expect(await r.resolve('localhost')).toEqual(['127.0.0.1', '::1']);
    expect(await r.resolve('PINNED.test.')).toEqual(['10.1.2.3']);
    expect(await r.resolve('pinned-alias')).toEqual(['10.1.2.3']);
    expect(await r.resolve('both.test')).toEqual(['203.0.113.7', '2001:db8::1']);
    expect(await r.resolve('v4only.test')).toEqual(['198.51.100.1', '198.51.100.2']);
    await expect(r.resolve('missing.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    // A missing hosts file: every name goes to the nameserver.
    const bare = createSystemResolver({ hostsFile: join(hostsFile, 'absent'), servers });
    await expect(bare.resolve('localhost')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('a name whose nameserver never answers fails on its own timeout, and holds no thread of the pool', async () => {
    const r = createSystemResolver({ hostsFile, servers, timeoutMs: 1_000, tries: 1 });
    let settled = 0;
    const slow = Array.from({ length: 16 }, (_, i) =>
      r
        .resolve(`slow.${i}.test`)
        .then(
          () => 'answered',
          (e) => e.code,
        )
        .finally(() => settled++),
    );
    // Work that needs the thread pool (four threads by default), and another lookup, finish while all sixteen
    // lookups still hang.
    await Promise.all(Array.from({ length: 8 }, () => promisify(pbkdf2)('k', 's', 1, 32, 'sha256')));
    expect(await r.resolve('both.test')).toEqual(['203.0.113.7', '2001:db8::1']);
    expect(settled).toBe(0);
    expect(new Set(await Promise.all(slow))).toEqual(new Set(['ETIMEOUT']));
  });
});
