/**
 * `hookrail verify`: a consumer's check of one received request — does it carry a valid Hookrail signature under
 * one of these secrets? The verdict is domain/signature-verify.ts's (the reference verifier's steps, over the
 * signing code Hookrail itself sends with); this file only gathers the inputs and prints the answer.
 */
import { parseArgs } from 'node:util';
import { parseSecret } from '../domain/signature.ts';
import {
  DEFAULT_TOLERANCE_SECONDS,
  type SignatureHeaderName,
  type VerifyResult,
  verifySignature,
} from '../domain/signature-verify.ts';
import { type CliIo, CliUsageError, readInput } from './io.ts';

const HELP = `Usage:
  hookrail verify --secret whsec_… [--secret whsec_…] --body <file|->
                  (--id <webhook-id> --timestamp <webhook-timestamp> --signature '<webhook-signature>'
                   | --headers <file|->)
                  [--tolerance 300] [--now <unix seconds>]

Checks that a received request carries a valid Hookrail (Standard Webhooks v1) signature under one of the
secrets (any one matching is enough, as during a rotation overlap). Without --secret, the secrets are read from
HOOKRAIL_WEBHOOK_SECRET (several separated by spaces or commas).

  --body <file|->      the raw request body, byte for byte ("-": standard input)
  --headers <file|->   the request's headers as "name: value" lines (curl -v or the request inspector's
                       "name": "value" lines also do); --id, --timestamp and --signature override them
  --tolerance <s>      accepted distance of webhook-timestamp from now, either way (default 300; 0: no check)
  --now <s>            the time to check against, in Unix seconds (default: the clock), to re-check an old request

Prints one JSON document: {"valid":true,"secret_index":…,"signature":"v1,…","timestamp":…} and exits 0, or
{"valid":false,"reason":…} and exits 1. Reasons: missing_header, invalid_header, timestamp_too_old,
timestamp_too_new, no_matching_signature.
`;

const NAMES: readonly SignatureHeaderName[] = ['webhook-id', 'webhook-timestamp', 'webhook-signature'];

export async function verifyCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseFlags(args);
  if (values.help) {
    io.out(HELP);
    return 0;
  }

  const secrets = values.secret?.length
    ? values.secret
    : (io.env.HOOKRAIL_WEBHOOK_SECRET ?? '').split(/[\s,]+/).filter(Boolean);
  if (secrets.length === 0) throw new CliUsageError('give --secret whsec_… (or set HOOKRAIL_WEBHOOK_SECRET)');
  for (const [i, s] of secrets.entries()) {
    try {
      parseSecret(s);
    } catch (err) {
      // Never echo the secret itself.
      throw new CliUsageError(`secret #${i + 1}: ${(err as Error).message}`);
    }
  }
  if (values.body === undefined)
    throw new CliUsageError('give --body <file> (or --body - for standard input)');
  if (values.body === '-' && values.headers === '-') {
    throw new CliUsageError('--body and --headers cannot both read standard input');
  }
  const fromFile =
    values.headers === undefined
      ? null
      : parseHeaderLines((await readInput(values.headers, io)).toString('utf8'));
  const headers = {
    'webhook-id': values.id ?? fromFile?.get('webhook-id') ?? null,
    'webhook-timestamp': values.timestamp ?? fromFile?.get('webhook-timestamp') ?? null,
    'webhook-signature': values.signature ?? fromFile?.get('webhook-signature') ?? null,
  };
  // Without a headers file, a missing flag is a mistake in the command line, not a property of the request.
  if (fromFile === null) {
    const missing = NAMES.filter((n) => headers[n] === null);
    if (missing.length > 0) {
      throw new CliUsageError(
        `give ${missing.map((n) => `--${n.slice('webhook-'.length)}`).join(', ')} (or --headers <file>)`,
      );
    }
  }
  const tolerance = nonNegativeInteger('--tolerance', values.tolerance ?? String(DEFAULT_TOLERANCE_SECONDS));
  const now =
    values.now === undefined ? Math.floor(Date.now() / 1000) : nonNegativeInteger('--now', values.now);
  const body = await readInput(values.body, io);

  const result = verifySignature({
    secrets,
    webhookId: headers['webhook-id'],
    timestamp: headers['webhook-timestamp'],
    signature: headers['webhook-signature'],
    body,
    nowSeconds: now,
    toleranceSeconds: tolerance,
  });
  io.out(`${JSON.stringify(toJson(result))}\n`);
  return result.valid ? 0 : 1;
}

function parseFlags(args: string[]) {
  try {
    return parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        secret: { type: 'string', multiple: true },
        id: { type: 'string' },
        timestamp: { type: 'string' },
        signature: { type: 'string' },
        headers: { type: 'string' },
        body: { type: 'string' },
        tolerance: { type: 'string' },
        now: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new CliUsageError(`${(err as Error).message} (see hookrail verify --help)`);
  }
}

function nonNegativeInteger(flag: string, text: string): number {
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n)) {
    throw new CliUsageError(`${flag} must be a whole number of seconds (got ${JSON.stringify(text)})`);
  }
  return n;
}

/**
 * The three signature headers from header lines as people copy them, names case-insensitive: `name: value` (a raw
 * request, or curl -v with its `> ` and `< ` prefixes), or `"name": "value",` (the headers object of the request
 * inspector, GET /v1/attempts/:id, as it is pretty-printed). Anything else — a request line, curl's `*` notes,
 * other headers, braces, blank lines — is skipped. One of the three given twice with different values (the
 * inspector's hops of a redirected attempt, two requests pasted together) is refused rather than guessed at.
 */
export function parseHeaderLines(text: string): Map<SignatureHeaderName, string> {
  const out = new Map<SignatureHeaderName, string>();
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/^[<>] /, '').trim();
    let pair: [string, string] | null = null;
    const quoted = /^("(?:[^"\\]|\\.)*")\s*:\s*("(?:[^"\\]|\\.)*")\s*,?$/.exec(line);
    if (quoted) {
      try {
        pair = [JSON.parse(quoted[1] as string), JSON.parse(quoted[2] as string)];
      } catch {
        pair = null;
      }
    } else {
      const colon = line.indexOf(':');
      if (colon > 0) pair = [line.slice(0, colon), line.slice(colon + 1).trim()];
    }
    const name = pair?.[0].toLowerCase() as SignatureHeaderName;
    if (!pair || !NAMES.includes(name)) continue;
    const seen = out.get(name);
    if (seen !== undefined && seen !== pair[1]) {
      throw new CliUsageError(
        `${name} appears twice with different values in the headers file: keep one request`,
      );
    }
    out.set(name, pair[1]);
  }
  return out;
}

function toJson(r: VerifyResult): Record<string, unknown> {
  if (r.valid) {
    return { valid: true, secret_index: r.secretIndex, signature: r.signature, timestamp: r.timestamp };
  }
  switch (r.reason) {
    case 'missing_header':
    case 'invalid_header':
      return { valid: false, reason: r.reason, header: r.header };
    case 'timestamp_too_old':
    case 'timestamp_too_new':
      return {
        valid: false,
        reason: r.reason,
        timestamp: r.timestamp,
        now: r.now,
        signature_matches: r.signatureMatches,
      };
    case 'no_matching_signature':
      return { valid: false, reason: r.reason, timestamp: r.timestamp };
  }
}
