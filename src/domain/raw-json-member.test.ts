import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { rawJsonMember } from './raw-json-member.ts';

describe('rawJsonMember', () => {
  it('answers the value text exactly as written, without the whitespace around it', () => {
    expect(rawJsonMember('{"data":{"a":1}}', 'data')).toBe('{"a":1}');
    expect(rawJsonMember(' \t\r\n{ \n"data" \t: \r\n { "a" : [ 1 , 2 ] } \n} \n', 'data')).toBe(
      '{ "a" : [ 1 , 2 ] }',
    );
    const exact =
      '{"n":12345678901234567890,"f":1.10,"z":-0,"e":1E+2,"s":"\\u00e9\\"}","nested":[{"a":1e400}]}';
    expect(rawJsonMember(`{"type":"x","data":${exact}}`, 'data')).toBe(exact);
  });

  it('finds the member wherever it is among the others', () => {
    expect(
      rawJsonMember('{"tenant_id":"ten_1","type":"a.b","data":{"x":true},"resource_id":"r"}', 'data'),
    ).toBe('{"x":true}');
    expect(rawJsonMember('{"a":[1,{"data":2}],"b":{"data":3},"data":{"k":[]}}', 'data')).toBe('{"k":[]}');
  });

  it('skips strings whole: braces, brackets, quotes and backslashes inside them do not count', () => {
    const tricky = '{"s":"}]{[\\"data\\":1,","t":"\\\\","u":"\\\\\\"}"}';
    expect(rawJsonMember(`{"before":"{\\"data\\":0}","data":${tricky},"after":"]}"}`, 'data')).toBe(tricky);
    expect(JSON.parse(rawJsonMember(`{"data":${tricky}}`, 'data')!)).toEqual(JSON.parse(tricky));
    // A key that only looks like `data` because of an escaped quote is not the member.
    expect(rawJsonMember('{"x\\"data":1,"y":2}', 'data')).toBeNull();
  });

  it('takes the last of duplicate members, as JSON.parse does', () => {
    const text = '{"data":{"first":1},"type":"t","data":{"second":2,"second":3}}';
    expect(rawJsonMember(text, 'data')).toBe('{"second":2,"second":3}');
    expect(JSON.parse(text).data).toEqual({ second: 3 });
  });

  it('matches a key by what it decodes to', () => {
    expect(rawJsonMember('{"d\\u0061ta":{"a":1}}', 'data')).toBe('{"a":1}');
    expect(rawJsonMember('{"data":{"a":1},"\\u0064ata":{"b":2}}', 'data')).toBe('{"b":2}');
    expect(rawJsonMember('{"dat":1,"datas":2,"Data":3,"dat\\u0061s":4}', 'data')).toBeNull();
  });

  it('answers any kind of value', () => {
    expect(rawJsonMember('{"data":"a string"}', 'data')).toBe('"a string"');
    expect(rawJsonMember('{"data":-1.5e-3 }', 'data')).toBe('-1.5e-3');
    expect(rawJsonMember('{"data":null,"x":1}', 'data')).toBe('null');
    expect(rawJsonMember('{"data":[]}', 'data')).toBe('[]');
  });

  it('answers null when there is no such member, or no object', () => {
    expect(rawJsonMember('{}', 'data')).toBeNull();
    expect(rawJsonMember(' { } ', 'data')).toBeNull();
    expect(rawJsonMember('{"type":"a","nested":{"data":1}}', 'data')).toBeNull();
    expect(rawJsonMember('[{"data":1}]', 'data')).toBeNull();
    expect(rawJsonMember('"data"', 'data')).toBeNull();
    expect(rawJsonMember('', 'data')).toBeNull();
  });

  it('answers null on truncated text, without throwing or looping', () => {
    const whole = '{"a":"x","data":{"b":["c",{"d":"e\\"f"}]}}';
    for (let n = 0; n < whole.length; n++) {
      const part = rawJsonMember(whole.slice(0, n), 'data');
      // A truncated document never yields the whole member.
      expect(part === null || part.length < '{"b":["c",{"d":"e\\"f"}]}'.length).toBe(true);
    }
    expect(rawJsonMember(whole, 'data')).toBe('{"b":["c",{"d":"e\\"f"}]}');
  });

  it('agrees with JSON.parse on generated documents', () => {
    const random = seededRandom(20260101);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random.float() * xs.length)]!;
    const space = () => pick(['', '', ' ', '\n', '\t', ' \r\n ']);
    const scalars = [
      '0',
      '-0',
      '1.10',
      '12345678901234567890',
      '1e400',
      'true',
      'false',
      'null',
      '""',
      '"{"',
    ];
    const strings = ['"a"', '"data"', '"\\"data\\":"', '"}]"', '"\\\\"', '"\\u00e9"', '"é🎉"', '"[{"'];
    const value = (depth: number): string => {
      const r = random.float();
      if (depth > 3 || r < 0.4) return pick([...scalars, ...strings]);
      const n = Math.floor(random.float() * 4);
      const items: string[] = [];
      for (let i = 0; i < n; i++) {
        items.push(
          r < 0.7
            ? `${space()}${pick([...strings, '"data"'])}${space()}:${space()}${value(depth + 1)}${space()}`
            : `${space()}${value(depth + 1)}${space()}`,
        );
      }
      return r < 0.7 ? `{${items.join(',')}}` : `[${items.join(',')}]`;
    };
    for (let round = 0; round < 500; round++) {
      const members: string[] = [];
      const n = Math.floor(random.float() * 5);
      for (let i = 0; i < n; i++)
        members.push(`${space()}${pick(strings)}${space()}:${space()}${value(0)}${space()}`);
      const text = `${space()}{${members.join(',')}}${space()}`;
      const parsed = JSON.parse(text) as Record<string, unknown>;
      const raw = rawJsonMember(text, 'data');
      if (!Object.hasOwn(parsed, 'data')) expect(raw).toBeNull();
      else {
        expect(raw).not.toBeNull();
        expect(JSON.parse(raw!)).toEqual(parsed.data);
        // Exactly one value, as written: no surrounding whitespace, and found verbatim in the text.
        expect(raw!.trim()).toBe(raw);
        expect(text.includes(raw!)).toBe(true);
      }
    }
  });
});
