/**
 * The signature verification examples of docs/consumer-contract.md (PRODUCT.md §9: worked examples in Node, Python
 * and Java that the tests run), taken from the document as printed and run as real programs against requests that
 * Hookrail's signing code signs: one secret, two during a rotation (either alone verifies), and three ways to be
 * rejected. Needs python3 and a JDK (`java File.java`), both on the machines this project is built on; the test fails
 * rather than skips without them.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { signatureHeader } from '../../src/domain/signature.ts';

const DOC = readFileSync(new URL('../../docs/consumer-contract.md', import.meta.url), 'utf8');

/** The fenced block of `lang` whose first line names `file`. */
function example(lang: string, file: string): string {
  for (const m of DOC.matchAll(/```(\w+)\n([\s\S]*?)```/g))
    if (m[1] === lang && m[2]!.split('\n')[0]!.includes(file)) return m[2]!;
  throw new Error(`docs/consumer-contract.md has no ${lang} block for ${file}`);
}

const dir = mkdtempSync(join(tmpdir(), 'hookrail-verify-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PROGRAMS = [
  { name: 'Node', file: 'verify.mjs', lang: 'js', command: [process.execPath] },
  { name: 'Python', file: 'verify.py', lang: 'python', command: ['python3'] },
  { name: 'Java', file: 'Verify.java', lang: 'java', command: ['java'] },
] as const;
for (const p of PROGRAMS) writeFileSync(join(dir, p.file), example(p.lang, p.file));

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;
const body = Buffer.from(
  JSON.stringify({
    id: 'evt_1',
    type: 'order.created',
    timestamp: new Date().toISOString(),
    data: { é: '"q" \\' },
  }),
);

function run(p: (typeof PROGRAMS)[number], env: Record<string, string>, input: Buffer) {
  const r = spawnSync(p.command[0], [...p.command.slice(1), join(dir, p.file)], {
    env: { ...process.env, ...env },
    input,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.error) throw r.error;
  return { status: r.status, out: r.stdout.trim(), err: r.stderr };
}

// Each test starts its program three times; `java Verify.java` compiles the source on every start, which alone
// can take most of the default 30 s on a loaded machine.
describe.each(PROGRAMS)('the $name verification example', { timeout: 120_000 }, (p) => {
  const now = Math.floor(Date.now() / 1000);
  const id = 'msg_01JD8Q0000000000000000000A';
  const [oldSecret, newSecret] = [secret(), secret()];
  const env = (s: string, o: { ts?: number; sig?: string } = {}) => ({
    HOOKRAIL_SECRET: s,
    WEBHOOK_ID: id,
    WEBHOOK_TIMESTAMP: String(o.ts ?? now),
    WEBHOOK_SIGNATURE: o.sig ?? signatureHeader([newSecret, oldSecret], id, o.ts ?? now, body),
  });

  it('verifies a request signed with its secret, alone or beside another during a rotation', () => {
    const alone = run(p, env(newSecret, { sig: signatureHeader([newSecret], id, now, body) }), body);
    expect(alone, alone.err).toMatchObject({ status: 0, out: 'verified' });
    for (const s of [oldSecret, newSecret])
      expect(run(p, env(s), body)).toMatchObject({ status: 0, out: 'verified' });
  });

  it('rejects a changed body, another secret and a stale timestamp', () => {
    const changed = Buffer.concat([body, Buffer.from(' ')]);
    expect(run(p, env(newSecret), changed)).toMatchObject({ status: 1, out: 'rejected' });
    expect(run(p, env(secret()), body)).toMatchObject({ status: 1, out: 'rejected' });
    const stale = now - 10 * 60;
    expect(run(p, env(newSecret, { ts: stale }), body)).toMatchObject({ status: 1, out: 'rejected' });
  });
});
