/**
 * Import-boundary check (part of `npm test`). Fails when:
 *  1. src/domain imports anything but other domain files and node:crypto (decisions stay pure: no I/O, no clock);
 *  2. the capture plane (intake) can reach — through value imports, transitively — endpoints, subscriptions,
 *     fan-out, delivery or any HTTP client (ADR-01: "the dependency does not exist rather than being unused").
 * Type-only imports are erased at run time and do not count.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');

const INTAKE_ENTRIES = [
  'src/app/accept-event.ts',
  'src/app/group-commit.ts',
  'src/app/tenant-directory.ts',
  'src/api/routes/events.ts',
];
const INTAKE_FORBIDDEN_FILES =
  /(endpoint|subscription|fan-?out|deliver|attempt|secret|adapters\/http|worker\/)/;
const INTAKE_FORBIDDEN_PACKAGES = new Set([
  'undici',
  'node:http',
  'node:https',
  'node:net',
  'node:dns',
  'http',
  'https',
]);
const DOMAIN_ALLOWED_PACKAGES = new Set(['node:crypto']);

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return walk(p);
    return p.endsWith('.ts') && !p.endsWith('.test.ts') ? [p] : [];
  });
}

/** Value imports (and re-exports) of a file: relative ones resolved to absolute paths, packages as named. */
function imports(file: string): { files: string[]; packages: string[] } {
  const src = readFileSync(file, 'utf8');
  const files: string[] = [];
  const packages: string[] = [];
  const re =
    /^\s*(import|export)\s+(type\s+)?(?:[^'"]*?\s+from\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;
  for (const m of src.matchAll(re)) {
    if (m[2]) continue; // `import type …`
    const spec = (m[3] ?? m[4]) as string;
    // `import { type A, type B } from` is type-only too.
    if (m[0].includes('{') && /^\s*import\s*\{\s*(type\s+\w+\s*,?\s*)+\}\s*from/.test(m[0])) continue;
    if (spec.startsWith('.')) files.push(resolve(dirname(file), spec));
    else
      packages.push(
        spec.startsWith('node:')
          ? spec
          : spec
              .split('/')
              .slice(0, spec.startsWith('@') ? 2 : 1)
              .join('/'),
      );
  }
  return { files, packages };
}

const problems: string[] = [];
const rel = (p: string) => relative(ROOT, p);

for (const file of walk(join(SRC, 'domain'))) {
  const { files, packages } = imports(file);
  for (const f of files)
    if (!f.startsWith(join(SRC, 'domain'))) problems.push(`${rel(file)} imports ${rel(f)}`);
  for (const p of packages) if (!DOMAIN_ALLOWED_PACKAGES.has(p)) problems.push(`${rel(file)} imports ${p}`);
  const text = readFileSync(file, 'utf8');
  if (/\bDate\.now\(|\bMath\.random\(|new Date\(\)/.test(text))
    problems.push(`${rel(file)} reads the clock or Math.random`);
}

const seen = new Map<string, string>();
const queue = INTAKE_ENTRIES.map((e) => join(ROOT, e));
for (const e of queue) seen.set(e, e);
while (queue.length > 0) {
  const file = queue.shift() as string;
  const chain = (f: string): string =>
    seen.get(f) === f ? rel(f) : `${chain(seen.get(f) as string)} → ${rel(f)}`;
  if (INTAKE_FORBIDDEN_FILES.test(rel(file))) problems.push(`intake reaches ${chain(file)}`);
  const { files, packages } = imports(file);
  for (const p of packages)
    if (INTAKE_FORBIDDEN_PACKAGES.has(p)) problems.push(`intake reaches ${p} via ${chain(file)}`);
  for (const f of files) {
    if (!seen.has(f)) {
      seen.set(f, file);
      queue.push(f);
    }
  }
}

if (problems.length > 0) {
  process.stderr.write(`import boundaries violated:\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
  process.exit(1);
}
process.stdout.write(`import boundaries ok (${seen.size} intake modules checked)\n`);
