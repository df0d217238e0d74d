/**
 * Interface-change gate for the published egress ranges (ADR-11; part of `npm run check`). A consumer's firewall
 * holds a copy of egress-ranges.json that we cannot see or update, so the file changes only together with a
 * change record. Fails when:
 *  1. the file is not a valid egress ranges document (the same validation the server runs at startup);
 *  2. no record in docs/interface-changes/ names `egress-ranges version <N>` for the file's version, or more
 *     than one does, or one of the versions 1…N-1 has lost its record (history is append-only);
 *  3. the record states no deprecation window (`Deprecation window: <days> days`, at least 30);
 *  4. the record does not list the SHA-256 of the file's canonical content (`SHA-256: <hex>`) — so editing the
 *     ranges without writing or updating the record fails, while reformatting the file does not;
 *  5. the file's `change_record` is not that record.
 * It needs no git history, so it behaves the same on a clean CI clone as on a working copy.
 *
 *   node --import tsx scripts/check-interface-changes.ts            check the shipped file
 *   … --file <ranges.json> --root <dir>                            check a deployment's own file and records
 *   … --digest                                                     print the digest to put in a record
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { EgressRangesError, loadEgressRanges } from '../src/api/routes/egress-ranges.ts';

export const RECORDS_DIR = 'docs/interface-changes';
export const MIN_DEPRECATION_WINDOW_DAYS = 30;
const RECORD_NAME = /^(\d{4})-[a-z0-9][a-z0-9-]*\.md$/;

/** JSON with object keys sorted at every level and no whitespace: formatting does not change the digest. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function egressRangesDigest(fileText: string): string {
  return createHash('sha256')
    .update(canonicalJson(JSON.parse(fileText)))
    .digest('hex');
}

export interface CheckOptions {
  /** The directory `change_record` paths are relative to; records are read from <root>/docs/interface-changes. */
  root: string;
  /** Default <root>/egress-ranges.json. */
  rangesFile?: string;
}

export interface CheckResult {
  ok: boolean;
  problems: string[];
  version: number | null;
  digest: string | null;
  record: string | null;
}

interface ChangeRecord {
  path: string;
  text: string;
  versions: number[];
}

function readRecords(root: string): ChangeRecord[] {
  let names: string[];
  try {
    names = readdirSync(join(root, RECORDS_DIR));
  } catch {
    return [];
  }
  return names
    .filter((n) => RECORD_NAME.test(n))
    .sort()
    .map((n) => {
      const text = readFileSync(join(root, RECORDS_DIR, n), 'utf8');
      const versions = [...text.matchAll(/\begress-ranges version (\d+)\b/gi)].map((m) => Number(m[1]));
      return { path: `${RECORDS_DIR}/${n}`, text, versions: [...new Set(versions)] };
    });
}

export function checkInterfaceChanges(opts: CheckOptions): CheckResult {
  const root = resolve(opts.root);
  const file = resolve(opts.rangesFile ?? join(root, 'egress-ranges.json'));
  const result: CheckResult = { ok: false, problems: [], version: null, digest: null, record: null };
  const problems = result.problems;

  let ranges: ReturnType<typeof loadEgressRanges>;
  try {
    ranges = loadEgressRanges(file);
  } catch (err) {
    problems.push(err instanceof EgressRangesError ? err.message : String(err));
    return result;
  }
  const digest = egressRangesDigest(readFileSync(file, 'utf8'));
  result.version = ranges.version;
  result.digest = digest;

  const records = readRecords(root);
  const numbers = new Map<string, string>();
  for (const r of records) {
    const n = RECORD_NAME.exec(r.path.slice(RECORDS_DIR.length + 1))![1]!;
    const previous = numbers.get(n);
    if (previous) problems.push(`${r.path} and ${previous} share the number ${n}`);
    numbers.set(n, r.path);
  }
  for (let v = 1; v < ranges.version; v++) {
    if (!records.some((r) => r.versions.includes(v))) {
      problems.push(
        `no change record in ${RECORDS_DIR}/ names "egress-ranges version ${v}" (history is kept)`,
      );
    }
  }

  const matching = records.filter((r) => r.versions.includes(ranges.version));
  const fix =
    `write ${RECORDS_DIR}/NNNN-<what-changed>.md naming "egress-ranges version ${ranges.version}", ` +
    `a "Deprecation window: <days> days" line and "SHA-256: ${digest}"`;
  if (matching.length === 0) {
    problems.push(`egress ranges version ${ranges.version} has no change record: ${fix}`);
  } else if (matching.length > 1) {
    problems.push(
      `egress ranges version ${ranges.version} is named by more than one record: ${matching.map((r) => r.path).join(', ')}`,
    );
  } else {
    const record = matching[0]!;
    result.record = record.path;
    const window = /^[\s>*_-]*deprecation window[*_]*\s*:\s*[*_]*\s*(\d+)\s*days?\b/im.exec(record.text);
    if (!window) {
      problems.push(`${record.path} states no deprecation window (a line "Deprecation window: <days> days")`);
    } else if (Number(window[1]) < MIN_DEPRECATION_WINDOW_DAYS) {
      problems.push(
        `${record.path}: the deprecation window is ${window[1]} days; at least ${MIN_DEPRECATION_WINDOW_DAYS} are required`,
      );
    }
    const listed = [...record.text.matchAll(/sha-?256[*_]*\s*:\s*[*_`]*([0-9a-f]{64})\b/gi)].map((m) =>
      m[1]!.toLowerCase(),
    );
    if (!listed.includes(digest)) {
      problems.push(
        `${relative(root, file) || file} changed but ${record.path} does not list its SHA-256 ${digest}: ` +
          `a change to the published ranges needs a new version and change record (or, for a correction ` +
          `before publication, the record updated)`,
      );
    }
    if (ranges.change_record !== record.path) {
      problems.push(
        `change_record is "${ranges.change_record}" but the record for this version is ${record.path}`,
      );
    }
  }
  result.ok = problems.length === 0;
  return result;
}

function main(argv: string[]): number {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const root = resolve(arg('--root') ?? join(import.meta.dirname, '..'));
  const rangesFile = arg('--file');
  if (argv.includes('--digest')) {
    const file = resolve(rangesFile ?? join(root, 'egress-ranges.json'));
    process.stdout.write(`${egressRangesDigest(readFileSync(file, 'utf8'))}\n`);
    return 0;
  }
  const result = checkInterfaceChanges({ root, ...(rangesFile ? { rangesFile } : {}) });
  if (!result.ok) {
    for (const p of result.problems) process.stderr.write(`interface change check: ${p}\n`);
    return 1;
  }
  process.stdout.write(
    `egress ranges version ${result.version} matches ${result.record} (sha256 ${result.digest!.slice(0, 12)}…)\n`,
  );
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
