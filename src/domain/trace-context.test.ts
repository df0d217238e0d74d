import { describe, expect, it } from 'vitest';
import { parseTraceparent, traceParentParts } from './trace-context.ts';

const VALID = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('parseTraceparent', () => {
  it('keeps a valid version-00 header', () => {
    expect(parseTraceparent(VALID)).toBe(VALID);
    expect(traceParentParts(VALID)).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      flags: 1,
    });
  });

  it('reads a later version by its version-00 prefix', () => {
    expect(parseTraceparent(`01${VALID.slice(2)}-future`)).toBe(VALID);
    expect(parseTraceparent(`01${VALID.slice(2)}`)).toBe(VALID);
    expect(parseTraceparent(`01${VALID.slice(2)}x`)).toBeNull();
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['version ff', `ff${VALID.slice(2)}`],
    ['version 00 with more', `${VALID}-x`],
    ['upper-case hex', VALID.toUpperCase()],
    ['zero trace id', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
    ['zero parent id', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'],
    ['short trace id', '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01'],
    ['bad separator', '00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
    ['bad flags', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g'],
    ['too long', `01${VALID.slice(2)}-${'a'.repeat(600)}`],
  ])('ignores %s', (_name, header) => {
    expect(parseTraceparent(header)).toBeNull();
  });
});
