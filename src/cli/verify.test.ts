/**
 * `hookrail verify`, run in-process with captured output against requests signed by the reference library
 * (`standardwebhooks`) and against the frozen vectors of docs/consumer-contract.md's signature section.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { CliUsageError } from './io.ts';
import { verifyCommand } from './verify.ts';

const dir = mkdtempSync(join(tmpdir(), 'hookrail-verify-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
/** A file holding `content`; returns its path. */
function file(content: string | Buffer): string {
  const path = join(dir, `f${++files}`);
  writeFileSync(path, content);
  return path;
}

async function verify(args: string[], o: { env?: Record<string, string>; stdin?: Buffer } = {}) {
  let out = '';
  let err = '';
  const code = await verifyCommand(args, {
    out: (s) => {
      out += s;
    },
    err: (s) => {
      err += s;
    },
    env: o.env ?? {},
    interactive: false,
    confirm: async () => false,
    readStdin: async () => o.stdin ?? Buffer.alloc(0),
  });
  return { code, out, err, json: out.startsWith('{') ? JSON.parse(out) : null };
}

const SECRET = 'whsec_tnDbD7Ba0F2QcdRO8oU4Z8eShJIZEAhFNvOd4YTPavA=';
const OTHER = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ID = 'msg_01JD8Q0000000000000000000';
const TS = 1_767_225_600;
const BODY = Buffer.from(
  '{"id":"evt_1","type":"order.created","timestamp":"2026-01-01T00:00:00.000Z","data":{}}',
);
/** What the reference library signs this request with. */
const SIGNATURE = new Webhook(SECRET).sign(ID, new Date(TS * 1000), BODY);

const flags = (o: { secret?: string[]; body?: string; now?: number; signature?: string } = {}) => [
  ...(o.secret ?? [SECRET]).flatMap((s) => ['--secret', s]),
  '--id',
  ID,
  '--timestamp',
  String(TS),
  '--signature',
  o.signature ?? SIGNATURE,
  '--body',
  o.body ?? file(BODY),
  '--now',
  String(o.now ?? TS + 10),
];

describe('hookrail verify', () => {
  it('accepts a request signed by the reference library, and prints which secret matched', async () => {
    const r = await verify(flags());
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out.endsWith('}\n')).toBe(true);
    expect(r.json).toEqual({ valid: true, secret_index: 0, signature: SIGNATURE, timestamp: TS });
  });

  it('accepts when any one of several secrets matches (a rotation overlap)', async () => {
    const r = await verify(flags({ secret: [OTHER, SECRET] }));
    expect(r.code).toBe(0);
    expect(r.json).toMatchObject({ valid: true, secret_index: 1 });
  });

  it('accepts a header carrying several signatures, only one of them ours', async () => {
    const bogus = `v1,${Buffer.alloc(32, 7).toString('base64')}`;
    const other = new Webhook(OTHER).sign(ID, new Date(TS * 1000), BODY);
    const header = `${bogus} v1a,${Buffer.alloc(64, 1).toString('base64')} ${other} ${SIGNATURE}`;
    const r = await verify(flags({ signature: header }));
    expect(r.json).toEqual({ valid: true, secret_index: 0, signature: SIGNATURE, timestamp: TS });
  });

  it('rejects a body with one byte changed', async () => {
    const changed = Buffer.from(BODY);
    changed[changed.length - 2] = '['.charCodeAt(0);
    const r = await verify(flags({ body: file(changed) }));
    expect(r.code).toBe(1);
    expect(r.json).toEqual({ valid: false, reason: 'no_matching_signature', timestamp: TS });
  });

  it('rejects a wrong secret', async () => {
    const r = await verify(flags({ secret: [OTHER] }));
    expect(r).toMatchObject({ code: 1, json: { valid: false, reason: 'no_matching_signature' } });
  });

  it('rejects a stale timestamp, and accepts it with --tolerance 0 or a --now of its time', async () => {
    const stale = await verify(flags({ now: TS + 301 }));
    expect(stale.code).toBe(1);
    // The signature itself is right: the answer says so, to tell a replay or a clock problem from a wrong secret.
    expect(stale.json).toEqual({
      valid: false,
      reason: 'timestamp_too_old',
      timestamp: TS,
      now: TS + 301,
      signature_matches: true,
    });
    expect((await verify([...flags({ now: TS + 301 }), '--tolerance', '0'])).code).toBe(0);
    expect((await verify(flags({ now: TS + 300 }))).code).toBe(0); // exactly the tolerance: still accepted
    expect((await verify([...flags({ now: TS + 301 }), '--tolerance', '600'])).code).toBe(0);
    const future = await verify(flags({ now: TS - 301 }));
    expect(future.json).toMatchObject({ valid: false, reason: 'timestamp_too_new', signature_matches: true });
    const wrongAndStale = await verify(flags({ now: TS + 3_600, secret: [OTHER] }));
    expect(wrongAndStale.json).toMatchObject({ reason: 'timestamp_too_old', signature_matches: false });
  });

  it('checks against the clock without --now', async () => {
    const now = Math.floor(Date.now() / 1000);
    const signature = new Webhook(SECRET).sign(ID, new Date(now * 1000), BODY);
    const args = ['--secret', SECRET, '--id', ID, '--timestamp', String(now), '--signature', signature];
    expect((await verify([...args, '--body', file(BODY)])).json).toMatchObject({ valid: true });
    const old = ['--timestamp', String(now - 3_600), '--signature', SIGNATURE];
    expect((await verify([...args.slice(0, 4), ...old, '--body', file(BODY)])).json).toMatchObject({
      reason: 'timestamp_too_old',
    });
  });

  it('reads the headers from a file: any case, CRLF, curl -v prefixes, other lines skipped', async () => {
    const curl = [
      '*   Trying 127.0.0.1:8080...',
      '> POST /hooks HTTP/1.1',
      '> Host: 127.0.0.1:8080',
      '> Content-Type: application/json',
      `> Webhook-Id: ${ID}`,
      `> WEBHOOK-TIMESTAMP: ${TS}`,
      `> webhook-signature: ${SIGNATURE}`,
      '>',
      '< HTTP/1.1 204 No Content',
      '',
    ].join('\r\n');
    const args = ['--secret', SECRET, '--body', file(BODY), '--now', String(TS)];
    expect((await verify([...args, '--headers', file(curl)])).json).toMatchObject({ valid: true });
    // Flags override the file.
    const overridden = await verify([...args, '--headers', file(curl), '--id', 'msg_other']);
    expect(overridden.json).toMatchObject({ valid: false, reason: 'no_matching_signature' });
  });

  it("reads the request inspector's pretty-printed headers object", async () => {
    const inspector = JSON.stringify(
      {
        hops: [
          {
            url: 'https://example.com/hooks',
            headers: {
              'content-type': 'application/json',
              'webhook-id': ID,
              'webhook-timestamp': String(TS),
              'webhook-signature': SIGNATURE,
            },
            status: 200,
          },
        ],
      },
      null,
      2,
    );
    const r = await verify([
      '--secret',
      SECRET,
      '--body',
      file(BODY),
      '--now',
      String(TS),
      '--headers',
      file(inspector),
    ]);
    expect(r.json).toMatchObject({ valid: true, secret_index: 0 });
  });

  it('says which header a headers file lacks, and refuses one given twice with different values', async () => {
    const args = ['--secret', SECRET, '--body', file(BODY), '--now', String(TS)];
    const missing = await verify([
      ...args,
      '--headers',
      file(`webhook-id: ${ID}\nwebhook-timestamp: ${TS}\n`),
    ]);
    expect(missing.code).toBe(1);
    expect(missing.json).toEqual({ valid: false, reason: 'missing_header', header: 'webhook-signature' });
    const twice = `webhook-id: ${ID}\nwebhook-id: msg_other\n`;
    await expect(verify([...args, '--headers', file(twice)])).rejects.toThrow(/webhook-id appears twice/);
  });

  it('refuses a timestamp that is not digits only, and an id Hookrail never issues', async () => {
    const args = ['--secret', SECRET, '--body', file(BODY), '--signature', SIGNATURE, '--now', String(TS)];
    const ts = await verify([...args, '--id', ID, '--timestamp', `${TS}abc`]);
    expect(ts.json).toEqual({ valid: false, reason: 'invalid_header', header: 'webhook-timestamp' });
    const id = await verify([...args, '--id', 'msg.1', '--timestamp', String(TS)]);
    expect(id.json).toEqual({ valid: false, reason: 'invalid_header', header: 'webhook-id' });
  });

  it('reads the body from standard input with --body -', async () => {
    const args = flags().slice(0, -4);
    const r = await verify([...args, '--body', '-', '--now', String(TS)], { stdin: BODY });
    expect(r.json).toMatchObject({ valid: true });
    const other = await verify([...args, '--body', '-', '--now', String(TS)], { stdin: Buffer.from('{}') });
    expect(other.json).toMatchObject({ valid: false, reason: 'no_matching_signature' });
  });

  it('takes the secrets from HOOKRAIL_WEBHOOK_SECRET without --secret', async () => {
    const args = flags().slice(2);
    const r = await verify(args, { env: { HOOKRAIL_WEBHOOK_SECRET: `${OTHER} ${SECRET}` } });
    expect(r.json).toMatchObject({ valid: true, secret_index: 1 });
  });

  it.each([
    ['no secret', flags().slice(2)],
    ['no body', flags().filter((_, i, a) => a[i] !== '--body' && a[i - 1] !== '--body')],
    ['no id and no headers file', flags().filter((_, i, a) => a[i] !== '--id' && a[i - 1] !== '--id')],
    ['a secret without whsec_', ['--secret', SECRET.slice('whsec_'.length), ...flags().slice(2)]],
    ['an unknown flag', [...flags(), '--verbose']],
    ['a positional argument', [...flags(), 'extra']],
    ['a tolerance that is not whole seconds', [...flags(), '--tolerance', '1.5']],
    ['both inputs from standard input', [...flags().slice(0, -4), '--body', '-', '--headers', '-']],
    ['a body file that does not exist', flags({ body: join(dir, 'missing') })],
  ])('refuses %s as a usage error', async (_name, args) => {
    await expect(verify(args)).rejects.toBeInstanceOf(CliUsageError);
  });

  it('never echoes a secret in an error', async () => {
    const bad = 'whsec_tooShortButSecret';
    const err = await verify(['--secret', bad, ...flags().slice(2)]).catch((e: Error) => e);
    expect(err).toBeInstanceOf(CliUsageError);
    expect((err as Error).message).not.toContain('tooShortButSecret');
  });

  it('prints its help', async () => {
    const r = await verify(['--help']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/hookrail verify --secret/);
  });
});

/** SIGNATURES.md §5, fed through the command at 30 s after each vector's timestamp. */
describe('hookrail verify: frozen test vectors', () => {
  const vector = (secrets: string[], id: string, ts: number, body: Buffer, signature: string) =>
    verify([
      ...secrets.flatMap((s) => ['--secret', s]),
      '--id',
      id,
      '--timestamp',
      String(ts),
      '--signature',
      signature,
      '--body',
      file(body),
      '--now',
      String(ts + 30),
    ]);
  const V1_BODY = Buffer.from(
    '{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"1f81eb52-5198-4599-803e-771906343485"}}',
  );
  const V2_BODY = Buffer.from(
    '7b0a20202274797065223a2022696e766f6963652e70616964222c0a20202264617461223a207b22637573746f6d6572223a20225a6fc3ab20c391c3bac3b1657a222c2022616d6f756e74223a2022e282ac31322e3530222c20226e6f7465223a20227461625c7471756f74655c2220f09f8e89227d0a7d0a',
    'hex',
  );
  const V3 = {
    previous: 'whsec_BKz6QBTPA1FuZSceriaIyNz0DAYcWvpJ',
    current: 'whsec_yIJ3GiNuRBD0dCbBp8awBVzLDAJ5+aGVhEVhNnFp5xg=',
    body: Buffer.from('{"type":"endpoint.secret_rotated","data":{}}'),
    header: 'v1,1cSR36VlgrPCgsAGXWgJozA4s+ti1lzkAd+AIaRo7cQ= v1,MEZM+anYPi1FwZNdsaf3DEy65gkHv9Vue5mkm0xwUj8=',
  };

  it('V1: the spec example, 24-byte secret', async () => {
    const r = await vector(
      ['whsec_7iCoM8lWAMcEZE6mQhZvmLRgfaJY/7SC'],
      'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
      1674087231,
      V1_BODY,
      'v1,RYGGToyn8exrYitQzqtOo9qa6WR3QyhLPVByBHSUWl8=',
    );
    expect(r.json).toMatchObject({ valid: true, secret_index: 0 });
  });

  it('V2: multi-byte UTF-8, pretty-printed, trailing newline', async () => {
    const r = await vector(
      ['whsec_tnDbD7Ba0F2QcdRO8oU4Z8eShJIZEAhFNvOd4YTPavA='],
      'msg_01HZX3Q9V4N8T2M6R5K7J0AB1C',
      1700000000,
      V2_BODY,
      'v1,3szN+3d1zPqUWQ7I+UyPIR2hjTBSKU/gLWfI7RIfftY=',
    );
    expect(r.json).toMatchObject({ valid: true });
    const trimmed = await vector(
      ['whsec_tnDbD7Ba0F2QcdRO8oU4Z8eShJIZEAhFNvOd4YTPavA='],
      'msg_01HZX3Q9V4N8T2M6R5K7J0AB1C',
      1700000000,
      V2_BODY.subarray(0, -1),
      'v1,3szN+3d1zPqUWQ7I+UyPIR2hjTBSKU/gLWfI7RIfftY=',
    );
    expect(trimmed.json).toMatchObject({ valid: false, reason: 'no_matching_signature' });
  });

  it('V3: the rotation header verifies with either secret, not with an unrelated one', async () => {
    const at = 1767225600;
    const id = 'msg_rotation_0001';
    const previous = await vector([V3.previous], id, at, V3.body, V3.header);
    expect(previous.json).toEqual({
      valid: true,
      secret_index: 0,
      signature: 'v1,1cSR36VlgrPCgsAGXWgJozA4s+ti1lzkAd+AIaRo7cQ=',
      timestamp: at,
    });
    const current = await vector([V3.current], id, at, V3.body, V3.header);
    expect(current.json).toMatchObject({
      valid: true,
      signature: 'v1,MEZM+anYPi1FwZNdsaf3DEy65gkHv9Vue5mkm0xwUj8=',
    });
    const unrelated = await vector(['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], id, at, V3.body, V3.header);
    expect(unrelated.json).toMatchObject({ valid: false, reason: 'no_matching_signature' });
  });
});
