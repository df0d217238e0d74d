/**
 * `hookrail tenants | producer-keys | endpoints | events | replay`: the API's everyday calls from a terminal. Each
 * prints the API's answer as JSON on stdout; an error answer prints its stable code and message on stderr (exit 1).
 * Keys are sent as the API expects them: the operator token for tenants and producer keys, a tenant key for
 * endpoints and replay, a producer key for events.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { ApiFailure, apiTarget, call, JsonText } from './api-client.ts';
import { CliFailure, type CliIo, CliUsageError, readInput } from './io.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

const TARGET: Options = {
  api: { type: 'string' },
  token: { type: 'string' },
  'data-dir': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

export const API_USAGE = `  hookrail tenants create --name <name>                              (operator token)
  hookrail tenants list [--limit 100]
  hookrail tenants replace-key <ten_…>     (operator token; every old key of the tenant stops; the new one shown once)
  hookrail producer-keys create --name <name>                        (operator token)
  hookrail endpoints create --url <url> [--event-types 'order.*,refund.created'] [--description <text>]
                            [--max-concurrency 10] [--ordering none|endpoint|resource]   (tenant key)
  hookrail endpoints list | get <id> | health <id> | backlog <id> | disable <id>
  hookrail endpoints test <id> [--type <type> --totp <code>] [--data <json>]   (a type of one's own: with step-up)
  hookrail endpoints enable <id> --backlog deliver|skip|resume_from [--resume-from <ISO time>]
  hookrail endpoints rotate-secret <id> [--overlap-seconds 604800]      (the new secret is shown once)
  hookrail events send --tenant <ten_…> --type <type> [--data <json> | --data @file | --data -]
                       [--resource-id <id>] [--idempotency-key <key>]                       (producer key)
  hookrail replay --endpoint <ep_…> [--status dead,delivered,skipped] [--since <ISO time>] [--until <ISO time>]
                  [--yes]                                                                    (tenant key)
  hookrail replay --delivery <dlv_…>
  Every API command takes --api <url> (default http://HOOKRAIL_HOST:HOOKRAIL_PORT, or HOOKRAIL_API_URL) and
  --token <key> (or HOOKRAIL_TOKEN; operator commands fall back to the data directory's admin-token file).`;

function parse(args: string[], options: Options, positionals = 0) {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args,
      options: { ...TARGET, ...options },
      allowPositionals: positionals > 0,
      strict: true,
    });
  } catch (err) {
    throw new CliUsageError((err as Error).message);
  }
  if (parsed.positionals.length > positionals) {
    throw new CliUsageError(`unexpected argument "${parsed.positionals[positionals]}"`);
  }
  return {
    values: parsed.values as Record<string, string | boolean | undefined>,
    positionals: parsed.positionals,
  };
}

const str = (v: string | boolean | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

function need(values: Record<string, string | boolean | undefined>, name: string): string {
  const v = str(values[name]);
  if (v === undefined || v === '') throw new CliUsageError(`--${name} is required`);
  return v;
}

function integer(values: Record<string, string | boolean | undefined>, name: string): number | undefined {
  const v = str(values[name]);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new CliUsageError(`--${name} must be a whole number`);
  return Number(v);
}

const list = (v: string | undefined) =>
  v
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function print(io: CliIo, value: unknown) {
  io.out(`${JSON.stringify(value, null, 2)}\n`);
}

export async function tenantsCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === 'create') {
    const { values } = parse(rest, { name: { type: 'string' } });
    const t = apiTarget(values, io, true);
    print(io, await call(t, 'POST', '/v1/tenants', { name: need(values, 'name') }));
    return 0;
  }
  if (sub === 'list') {
    const { values } = parse(rest, { limit: { type: 'string' } });
    const t = apiTarget(values, io, true);
    print(io, await call(t, 'GET', `/v1/tenants?limit=${integer(values, 'limit') ?? 100}`));
    return 0;
  }
  if (sub === 'replace-key') {
    const { values, positionals } = parse(rest, {}, 1);
    const id = positionals[0];
    if (!id) throw new CliUsageError('tenants replace-key <tenant id>');
    const t = apiTarget(values, io, true);
    print(io, await call(t, 'POST', `/v1/tenants/${encodeURIComponent(id)}/key`));
    return 0;
  }
  throw new CliUsageError('tenants: create, list or replace-key');
}

export async function producerKeysCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'create') throw new CliUsageError('producer-keys: create');
  const { values } = parse(rest, { name: { type: 'string' } });
  const t = apiTarget(values, io, true);
  print(io, await call(t, 'POST', '/v1/producer-keys', { name: need(values, 'name') }));
  return 0;
}

export async function endpointsCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === 'create') {
    const { values } = parse(rest, {
      url: { type: 'string' },
      'event-types': { type: 'string' },
      description: { type: 'string' },
      'max-concurrency': { type: 'string' },
      ordering: { type: 'string' },
    });
    const t = apiTarget(values, io, false);
    const body = {
      url: need(values, 'url'),
      event_types: list(str(values['event-types'])) ?? ['*'],
      ...(values.description === undefined ? {} : { description: str(values.description) }),
      ...(values['max-concurrency'] === undefined
        ? {}
        : { max_concurrency: integer(values, 'max-concurrency') }),
      ...(values.ordering === undefined ? {} : { ordering: str(values.ordering) }),
    };
    print(io, await call(t, 'POST', '/v1/endpoints', body));
    return 0;
  }
  if (sub === 'list') {
    const { values } = parse(rest, { limit: { type: 'string' } });
    const t = apiTarget(values, io, false);
    print(io, await call(t, 'GET', `/v1/endpoints?limit=${integer(values, 'limit') ?? 100}`));
    return 0;
  }
  if (sub === 'disable' || sub === 'enable' || sub === 'test' || sub === 'rotate-secret') {
    return endpointAction(sub, rest, io);
  }
  const paths: Record<string, string> = { get: '', health: '/health', backlog: '/backlog' };
  if (sub !== undefined && sub in paths) {
    const { values, positionals } = parse(rest, {}, 1);
    const id = positionals[0];
    if (!id) throw new CliUsageError(`endpoints ${sub} <endpoint id>`);
    const t = apiTarget(values, io, false);
    print(io, await call(t, 'GET', `/v1/endpoints/${encodeURIComponent(id)}${paths[sub]}`));
    return 0;
  }
  throw new CliUsageError(
    'endpoints: create, list, get, health, backlog, disable, enable, test or rotate-secret',
  );
}

/**
 * The changes to one endpoint the API offers as actions. `enable` needs the backlog choice spelled out, as the API
 * does (ADR-14): `--backlog deliver|skip|resume_from` (with `--resume-from <ISO time>`); look at `endpoints
 * backlog <id>` first.
 */
async function endpointAction(sub: string, rest: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(
    rest,
    {
      backlog: { type: 'string' },
      'resume-from': { type: 'string' },
      type: { type: 'string' },
      data: { type: 'string' },
      totp: { type: 'string' },
      'overlap-seconds': { type: 'string' },
    },
    1,
  );
  const id = positionals[0];
  if (!id) throw new CliUsageError(`endpoints ${sub} <endpoint id>`);
  const t = apiTarget(values, io, false);
  const path = `/v1/endpoints/${encodeURIComponent(id)}`;
  if (sub === 'disable') {
    print(io, await call(t, 'POST', `${path}/disable`));
  } else if (sub === 'enable') {
    const backlog = need(values, 'backlog');
    const from = str(values['resume-from']);
    print(io, await call(t, 'POST', `${path}/enable`, { backlog, ...(from ? { resume_from: from } : {}) }));
  } else if (sub === 'test') {
    const fields = values.type === undefined ? {} : { type: str(values.type) };
    const body = values.data === undefined ? fields : withData(fields, await readData(str(values.data), io));
    // A type of one's choosing is an elevated action: `--totp` is the current code of the tenant's authenticator,
    // traded for a step-up token first.
    const code = str(values.totp);
    const headers: Record<string, string> =
      code === undefined
        ? {}
        : {
            'x-step-up-token': (await call<{ token: string }>(t, 'POST', '/v1/auth/step-up', { totp: code }))
              .token,
          };
    print(io, await call(t, 'POST', `${path}/test`, body, headers));
  } else {
    const overlap = integer(values, 'overlap-seconds');
    print(
      io,
      await call(t, 'POST', `${path}/secrets`, overlap === undefined ? {} : { overlap_seconds: overlap }),
    );
  }
  return 0;
}

export async function eventsCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'send') throw new CliUsageError('events: send');
  const { values } = parse(rest, {
    tenant: { type: 'string' },
    type: { type: 'string' },
    data: { type: 'string' },
    'resource-id': { type: 'string' },
    'idempotency-key': { type: 'string' },
  });
  const t = apiTarget(values, io, false);
  const data = await readData(str(values.data), io);
  const key = str(values['idempotency-key']);
  const body = withData(
    {
      tenant_id: need(values, 'tenant'),
      type: need(values, 'type'),
      ...(values['resource-id'] === undefined ? {} : { resource_id: str(values['resource-id']) }),
    },
    data,
  );
  print(io, await call(t, 'POST', '/v1/events', body, key ? { 'idempotency-key': key } : {}));
  return 0;
}

/**
 * `--data`: JSON inline, `@file`, or `-` for standard input; absent: `{}`. Checked to be JSON, then sent as the
 * text given — Hookrail stores and delivers data byte for byte, and a parse here would round integers beyond 2^53.
 */
async function readData(v: string | undefined, io: CliIo): Promise<string> {
  if (v === undefined) return '{}';
  const text =
    v === '-' || v.startsWith('@') ? (await readInput(v === '-' ? v : v.slice(1), io)).toString('utf8') : v;
  try {
    JSON.parse(text);
  } catch {
    throw new CliUsageError('--data must be JSON (inline, @file or - for standard input)');
  }
  return text.trim();
}

/** `fields` as a JSON object with `data` last, as the text given. */
const withData = (fields: Record<string, string | undefined>, dataText: string): JsonText => {
  const head = JSON.stringify(fields).slice(0, -1);
  return new JsonText(`${head}${head.length > 1 ? ',' : ''}"data":${dataText}}`);
};

interface BulkAnswer {
  count: number;
  more: boolean;
  first_due_at: string | null;
  last_due_at: string | null;
  estimated_seconds: number;
}

/**
 * Bulk replay asks the API as a person would: first without confirmation; a 409 `confirmation_required` (more
 * than 100 match) is shown with its count and estimate and confirmed by `--yes` or at the prompt, and a count
 * confirmed at the prompt is sent as `expected_count` (more matching by then is shown again). While the API
 * says more match than one request replays (10,000), it asks again, confirmed, until none are left.
 */
export async function replayCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, {
    endpoint: { type: 'string' },
    delivery: { type: 'string' },
    status: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    yes: { type: 'boolean', short: 'y' },
  });
  const t = apiTarget(values, io, false);
  const delivery = str(values.delivery);
  if (delivery !== undefined) {
    if (values.endpoint !== undefined) throw new CliUsageError('--delivery or --endpoint, not both');
    print(io, await call(t, 'POST', `/v1/deliveries/${encodeURIComponent(delivery)}/replay`));
    return 0;
  }
  const endpoint = need(values, 'endpoint');
  // `until` fixed once for every request of the run: left to each request it would be that request's own time, and
  // the replays an earlier request made (delivered or dead by then) would match the next one and go out again.
  const filter = {
    ...(values.status === undefined ? {} : { status: list(str(values.status)) }),
    ...(values.since === undefined ? {} : { since: str(values.since) }),
    until: str(values.until) ?? new Date().toISOString(),
  };
  const path = `/v1/endpoints/${encodeURIComponent(endpoint)}/replay`;
  let confirmed = values.yes === true;
  // The count a person confirmed at the prompt: the request holds to it (more matching by then asks again).
  let expected: number | null = null;
  const answers: BulkAnswer[] = [];
  for (;;) {
    let answer: BulkAnswer;
    try {
      answer = await call<BulkAnswer>(t, 'POST', path, {
        ...filter,
        ...(confirmed ? { confirm: true } : {}),
        ...(expected !== null ? { expected_count: expected } : {}),
      });
    } catch (err) {
      if (!(err instanceof ApiFailure) || err.code !== 'confirmation_required') throw err;
      const d = err.details as { count: number; more: boolean; estimated_seconds: number };
      const what = `${d.count}${d.more ? '+' : ''} deliveries match (about ${d.estimated_seconds} s to send)`;
      if (!io.interactive) throw new CliFailure(`${what}: pass --yes to replay them`);
      if (!(await io.confirm(`${what}. Replay them?`))) {
        io.err('nothing replayed\n');
        return 1;
      }
      confirmed = true;
      expected = d.more ? null : d.count;
      continue;
    }
    expected = null;
    answers.push(answer);
    const total = answers.reduce((n, a) => n + a.count, 0);
    if (io.interactive) io.err(`\rreplayed ${total}${answer.more ? ', more match…' : ''}`);
    if (!answer.more || answer.count === 0) break;
    confirmed = true;
  }
  if (io.interactive) io.err('\n');
  print(
    io,
    answers.length === 1
      ? answers[0]
      : { requests: answers, count: answers.reduce((n, a) => n + a.count, 0) },
  );
  return 0;
}
