/** A real pino logger whose JSON lines are kept, parsed, for tests that check what was logged. */
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

export function captureLog(level = 'info'): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}
