/**
 * The SQLite adapter's SQL text: no bare bound LIMIT (`LIMIT ?`, `LIMIT @n`). SQLite prepares such a statement again
 * on every call (rows.ts, St); `LIMIT ? + 0` keeps the prepared plan.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const DIR = new URL('./', import.meta.url);
// `${` is a template literal's interpolation (a constant written into the text), not a `$name` parameter.
const BARE_BOUND_LIMIT = /\b(LIMIT|OFFSET)\s+(?!\$\{)[?@:$][A-Za-z0-9_]*(?![A-Za-z0-9_]|\s*[-+*/])/gi;
/** Comments may name the pattern. */
const withoutComments = (code: string) => code.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

function bareBoundLimits(sql: string): string[] {
  return [...sql.matchAll(BARE_BOUND_LIMIT)].map((m) => m[0]);
}

describe('SQLite adapter SQL text', () => {
  it('finds a bare bound LIMIT and lets an expression pass', () => {
    expect(bareBoundLimits('SELECT 1 FROM t ORDER BY a LIMIT ?')).toEqual(['LIMIT ?']);
    expect(bareBoundLimits('SELECT 1 FROM t LIMIT @cap)')).toEqual(['LIMIT @cap']);
    expect(bareBoundLimits('SELECT 1 FROM t LIMIT ? OFFSET ?')).toEqual(['LIMIT ?', 'OFFSET ?']);
    expect(bareBoundLimits('SELECT 1 FROM t LIMIT ? + 0')).toEqual([]);
    expect(bareBoundLimits('SELECT 1 FROM t LIMIT 1000')).toEqual([]);
    expect(bareBoundLimits('SELECT 1 FROM t LIMIT $cap')).toEqual(['LIMIT $cap']);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text the check reads
    expect(bareBoundLimits('SELECT 1 FROM t LIMIT ${PAGE}')).toEqual([]);
  });

  it('has no bare bound LIMIT in any source file of the adapter', () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
    expect(files.length).toBeGreaterThan(5);
    const found = files.flatMap((f) =>
      bareBoundLimits(withoutComments(readFileSync(new URL(f, DIR), 'utf8'))).map((m) => `${f}: ${m}`),
    );
    expect(found).toEqual([]);
  });
});
