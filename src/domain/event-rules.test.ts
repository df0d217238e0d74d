import { describe, expect, it } from 'vitest';
import { checkDataDepth, jsonDepth, MAX_JSON_DEPTH } from './event-rules.ts';

/** `depth` levels of nesting, alternating objects and arrays. */
function nestedValue(depth: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? { k: v } : [1, v];
  return v;
}
const nested = (depth: number) => JSON.stringify(nestedValue(depth));
const depthOf = (value: unknown) => jsonDepth(JSON.stringify(value));

describe('jsonDepth', () => {
  it('counts objects and arrays, not scalars', () => {
    expect(depthOf('x')).toBe(0);
    expect(depthOf(null)).toBe(0);
    expect(depthOf(3)).toBe(0);
    expect(depthOf({})).toBe(1);
    expect(depthOf([])).toBe(1);
    expect(depthOf({ a: 1, b: 'x', c: null })).toBe(1);
    expect(depthOf({ a: { b: [1, 2, { c: true }] } })).toBe(4);
  });

  it('skips brackets inside strings, escaped quotes included', () => {
    expect(jsonDepth('{"a":"[[[{{{","b":"\\"}}}\\\\","c":["]]]"]}')).toBe(2);
  });

  it('counts every duplicate of a key, which JSON.parse would drop and the stored text keeps', () => {
    const deep = `{"x":${'['.repeat(1_000)}${']'.repeat(1_000)},"x":1}`;
    expect(JSON.parse(deep)).toEqual({ x: 1 });
    expect(jsonDepth(deep)).toBe(MAX_JSON_DEPTH + 1);
    expect(() => checkDataDepth(deep)).toThrow(/nested deeper than 32 levels/);
    expect(() => checkDataDepth(nested(MAX_JSON_DEPTH))).not.toThrow();
  });

  it('takes the deepest branch wherever it is', () => {
    expect(depthOf({ a: 1, b: { c: { d: {} } }, e: [] })).toBe(4);
    expect(depthOf([[], [[[]]], {}])).toBe(4);
    expect(depthOf({ first: nestedValue(10), last: nestedValue(20) })).toBe(21);
  });

  it('reaches the limit exactly and stops just past it', () => {
    expect(jsonDepth(nested(MAX_JSON_DEPTH))).toBe(MAX_JSON_DEPTH);
    expect(jsonDepth(nested(MAX_JSON_DEPTH + 1))).toBe(MAX_JSON_DEPTH + 1);
    // Far deeper than the limit: answers at limit + 1 without walking (or recursing) further.
    expect(jsonDepth(`${'['.repeat(100_000)}${']'.repeat(100_000)}`)).toBe(MAX_JSON_DEPTH + 1);
    expect(depthOf({ ok: nestedValue(3), bad: nestedValue(MAX_JSON_DEPTH + 5) })).toBe(MAX_JSON_DEPTH + 1);
  });

  it('counts a __proto__ member like any other', () => {
    expect(jsonDepth('{"__proto__": {"a": {"b": {}}}}')).toBe(4);
  });
});
