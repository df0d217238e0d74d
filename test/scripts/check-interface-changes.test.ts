/**
 * The egress-ranges change gate (scripts/check-interface-changes.ts, ADR-11): passes on the repository as
 * committed, and fails on a temporary copy whose ranges were edited without a matching change record.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  canonicalJson,
  checkInterfaceChanges,
  egressRangesDigest,
} from '../../scripts/check-interface-changes.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const dirs: string[] = [];

/** A throwaway root holding copies of egress-ranges.json and docs/interface-changes/. */
function copyOfRepo(): { root: string; ranges: string; edit: (f: (doc: any) => void) => void } {
  const root = mkdtempSync(join(tmpdir(), 'hookrail-interface-'));
  dirs.push(root);
  cpSync(join(ROOT, 'egress-ranges.json'), join(root, 'egress-ranges.json'));
  cpSync(join(ROOT, 'docs/interface-changes'), join(root, 'docs/interface-changes'), { recursive: true });
  const ranges = join(root, 'egress-ranges.json');
  return {
    root,
    ranges,
    edit: (f) => {
      const doc = JSON.parse(readFileSync(ranges, 'utf8'));
      f(doc);
      writeFileSync(ranges, `${JSON.stringify(doc, null, 2)}\n`);
    },
  };
}

function writeRecord(root: string, name: string, text: string) {
  writeFileSync(join(root, 'docs/interface-changes', name), text);
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('check-interface-changes', () => {
  it('passes on the repository as committed', () => {
    const result = checkInterfaceChanges({ root: ROOT });
    expect(result.problems).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.record).toBe('docs/interface-changes/0001-initial-egress-ranges.md');
  });

  it('passes on an unmodified copy, and after reformatting only (the digest is of canonical content)', () => {
    const repo = copyOfRepo();
    expect(checkInterfaceChanges({ root: repo.root }).ok).toBe(true);
    const doc = JSON.parse(readFileSync(repo.ranges, 'utf8'));
    writeFileSync(repo.ranges, JSON.stringify({ change_record: doc.change_record, ...doc }));
    expect(checkInterfaceChanges({ root: repo.root }).problems).toEqual([]);
  });

  it('fails when a range is changed without a change record', () => {
    const repo = copyOfRepo();
    repo.edit((doc) => {
      doc.regions[0].cidrs[0] = '192.0.2.16/28';
    });
    const result = checkInterfaceChanges({ root: repo.root });
    expect(result.ok).toBe(false);
    expect(result.problems.join('\n')).toMatch(/does not list its SHA-256 [0-9a-f]{64}/);
  });

  it('fails when the version is bumped without a record, then passes once the record is written', () => {
    const repo = copyOfRepo();
    repo.edit((doc) => {
      doc.version = 2;
      doc.regions[0].cidrs.push('192.0.2.32/28');
      doc.regions[0].deprecated = [{ cidr: '192.0.2.0/28', remove_after: '2027-03-01' }];
      doc.change_record = 'docs/interface-changes/0002-add-primary-range.md';
    });
    const missing = checkInterfaceChanges({ root: repo.root });
    expect(missing.ok).toBe(false);
    expect(missing.problems.join('\n')).toMatch(/version 2 has no change record/);

    const digest = egressRangesDigest(readFileSync(repo.ranges, 'utf8'));
    writeRecord(
      repo.root,
      '0002-add-primary-range.md',
      `# 0002\n\n- Interface: egress-ranges version 2\n- Deprecation window: 10 days\n- SHA-256: \`${digest}\`\n`,
    );
    const shortWindow = checkInterfaceChanges({ root: repo.root });
    expect(shortWindow.problems.join('\n')).toMatch(/deprecation window is 10 days; at least 30/);

    writeRecord(
      repo.root,
      '0002-add-primary-range.md',
      `# 0002\n\n- Interface: egress-ranges version 2\n- Deprecation window: 90 days\n- SHA-256: \`${digest}\`\n`,
    );
    expect(checkInterfaceChanges({ root: repo.root }).problems).toEqual([]);
  });

  it('fails when a record lacks the deprecation window, or an earlier record is deleted', () => {
    const repo = copyOfRepo();
    const record = join(repo.root, 'docs/interface-changes/0001-initial-egress-ranges.md');
    writeFileSync(record, readFileSync(record, 'utf8').replace(/^- Deprecation window:.*$/m, ''));
    expect(checkInterfaceChanges({ root: repo.root }).problems.join('\n')).toMatch(/no deprecation window/);

    const bumped = copyOfRepo();
    bumped.edit((doc) => {
      doc.version = 2;
      doc.change_record = 'docs/interface-changes/0002-next.md';
    });
    const digest = egressRangesDigest(readFileSync(bumped.ranges, 'utf8'));
    rmSync(join(bumped.root, 'docs/interface-changes/0001-initial-egress-ranges.md'));
    writeRecord(
      bumped.root,
      '0002-next.md',
      `egress-ranges version 2\nDeprecation window: 90 days\nSHA-256: ${digest}\n`,
    );
    expect(checkInterfaceChanges({ root: bumped.root }).problems.join('\n')).toMatch(
      /names "egress-ranges version 1"/,
    );
  });

  it('fails on a file the server would refuse to start with', () => {
    const repo = copyOfRepo();
    repo.edit((doc) => {
      doc.regions[1].cidrs.push('10.0.0.1/8');
    });
    const result = checkInterfaceChanges({ root: repo.root });
    expect(result.ok).toBe(false);
    expect(result.problems.join('\n')).toMatch(/host bits set/);
  });

  it('canonical JSON sorts keys at every level and ignores whitespace', () => {
    expect(canonicalJson({ b: [{ y: 1, x: 2 }], a: 'x' })).toBe('{"a":"x","b":[{"x":2,"y":1}]}');
  });
});
