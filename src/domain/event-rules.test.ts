import { describe, expect, it } from 'vitest';
import { jsonDepth, MAX_JSON_DEPTH } from './event-rules.ts';

/** `depth` levels of nesting, alternating objects and arrays. */
function nested(depth: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? { k: v } : [1, v];
  return v;
}

describe('jsonDepth', () => {
  it('counts objects and arrays, not scalars', () => {
    expect(jsonDepth('x')).toBe(0);
    expect(jsonDepth(null)).toBe(0);
    expect(jsonDepth(3)).toBe(0);
    expect(jsonDepth({})).toBe(1);
    expect(jsonDepth([])).toBe(1);
    expect(jsonDepth({ a: 1, b: 'x', c: null })).toBe(1);
    expect(jsonDepth({ a: { b: [1, 2, { c: true }] } })).toBe(4);
  });

  it('takes the deepest branch wherever it is', () => {
    expect(jsonDepth({ a: 1, b: { c: { d: {} } }, e: [] })).toBe(4);
    expect(jsonDepth([[], [[[]]], {}])).toBe(4);
    expect(jsonDepth({ first: nested(10), last: nested(20) })).toBe(21);
  });

  it('reaches the limit exactly and stops just past it', () => {
    expect(jsonDepth(nested(MAX_JSON_DEPTH))).toBe(MAX_JSON_DEPTH);
    expect(jsonDepth(nested(MAX_JSON_DEPTH + 1))).toBe(MAX_JSON_DEPTH + 1);
    // Far deeper than the limit: answers at limit + 1 without walking (or recursing) further.
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    expect(jsonDepth(deep)).toBe(MAX_JSON_DEPTH + 1);
    expect(jsonDepth({ ok: nested(3), bad: nested(MAX_JSON_DEPTH + 5) })).toBe(MAX_JSON_DEPTH + 1);
  });

  it('counts only own properties, as JSON.parse makes them', () => {
    expect(jsonDepth(JSON.parse('{"__proto__": {"a": {"b": {}}}}'))).toBe(4);
  });
});
