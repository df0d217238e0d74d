/**
 * The source text of one member of a JSON object, exactly as written. Event `data` is stored and delivered as the
 * bytes the producer sent, because a parse/serialise round trip changes them: integers beyond 2^53 lose digits,
 * `1.10` becomes `1.1`, `-0` becomes `0`, `1e400` becomes `null`, escapes are rewritten and duplicate keys
 * collapse. Node 20's JSON.parse gives no access to source text, so this walks the text itself.
 *
 * It runs on every event at intake, after JSON.parse has accepted the same text: one pass over character codes,
 * no allocation but the returned substring. It does not validate: on text JSON.parse refused, it answers null or
 * some slice, and it never throws or loops forever (every step advances or returns).
 */

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACKET = 0x5b;
const BACKSLASH = 0x5c;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * The text of the value of the top-level object's member `name` (without the whitespace around it), or null when
 * the text is not an object or has no such member. With duplicate names the last one counts, as in JSON.parse, so
 * the text answered is the one whose parsed value the caller validated. `name` is matched as JSON.parse decodes
 * keys: `"d\u0061ta"` is `data`. `name` itself must hold no `"` or `\`.
 */
export function rawJsonMember(text: string, name: string): string | null {
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== OPEN_BRACE) return null;
  i = skipSpace(text, i + 1);
  if (text.charCodeAt(i) === CLOSE_BRACE) return null;
  let start = -1;
  let end = -1;
  for (;;) {
    if (text.charCodeAt(i) !== QUOTE) return null;
    const keyEnd = skipString(text, i);
    if (keyEnd < 0) return null;
    const matches = keyIs(text, i + 1, keyEnd - 1, name);
    i = skipSpace(text, keyEnd);
    if (text.charCodeAt(i) !== COLON) return null;
    i = skipSpace(text, i + 1);
    const valueEnd = skipValue(text, i);
    if (valueEnd < 0) return null;
    if (matches) {
      start = i;
      end = valueEnd;
    }
    i = skipSpace(text, valueEnd);
    const c = text.charCodeAt(i);
    if (c === CLOSE_BRACE) break;
    if (c !== COMMA) return null;
    i = skipSpace(text, i + 1);
  }
  return start < 0 ? null : text.slice(start, end);
}

/** JSON's four whitespace characters only (a BOM or NBSP is not whitespace to JSON.parse either). */
function skipSpace(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return i;
    i++;
  }
}

/** From the opening quote at `i` to just after the closing one; -1 if the text ends first. */
function skipString(text: string, i: number): number {
  const n = text.length;
  for (let j = i + 1; j < n; j++) {
    const c = text.charCodeAt(j);
    // An escape's next character is never the closing quote (`\"`, `\\`, and the first of `\uXXXX`'s letters).
    if (c === BACKSLASH) j++;
    else if (c === QUOTE) return j + 1;
  }
  return -1;
}

/**
 * From the first character of a value at `i` to just after its last; -1 if the text ends first. Containers are
 * skipped with a depth counter, not recursion, so nesting depth costs no stack (depth limits are the caller's,
 * on the parsed value); strings inside them are skipped whole, so their brackets and quotes do not count.
 */
function skipValue(text: string, i: number): number {
  const n = text.length;
  const first = text.charCodeAt(i);
  if (first === QUOTE) return skipString(text, i);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    for (let j = i; j < n; ) {
      const c = text.charCodeAt(j);
      if (c === QUOTE) {
        j = skipString(text, j);
        if (j < 0) return -1;
        continue;
      }
      if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) return j + 1;
      j++;
    }
    return -1;
  }
  // A number, true, false or null: it runs to the next delimiter or whitespace.
  let j = i;
  while (j < n) {
    const c = text.charCodeAt(j);
    if (
      c === COMMA ||
      c === CLOSE_BRACE ||
      c === CLOSE_BRACKET ||
      c === SPACE ||
      c === LF ||
      c === CR ||
      c === TAB
    )
      break;
    j++;
  }
  return j === i ? -1 : j;
}

/** Whether the key whose characters (between the quotes) are text[from, to) decodes to `name`. */
function keyIs(text: string, from: number, to: number, name: string): boolean {
  const length = to - from;
  // Without escapes a key is its own decoding; with any, it is longer than what it decodes to.
  if (length === name.length) return text.startsWith(name, from);
  if (length < name.length) return false;
  for (let j = from; j < to; j++) {
    // An escaped spelling of the name (`"d\u0061ta"`): decoded the way JSON.parse decodes it. Rare; allocates.
    if (text.charCodeAt(j) === BACKSLASH) return JSON.parse(text.slice(from - 1, to + 1)) === name;
  }
  return false;
}
