import { describe, expect, it } from 'vitest';
import { joinJsonTexts } from './query-helpers.ts';

describe('joinJsonTexts', () => {
  it('joins JSON texts by U+001E, NULL as the empty string', () => {
    expect(joinJsonTexts(['{"a":1}', null, '"\\u001e"'])).toBe('{"a":1}\u001e\u001e"\\u001e"');
    expect(joinJsonTexts([null])).toBe('');
  });
  it('refuses what is not JSON text rather than split it wrongly', () => {
    expect(() => joinJsonTexts(['{"a":"\u001e"}'])).toThrow(/not JSON text/);
    expect(() => joinJsonTexts(['{}', ''])).toThrow(/not JSON text/);
  });
});
