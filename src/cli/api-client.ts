/**
 * The CLI's HTTP client for Hookrail's own API: where it listens and which key to send. The commands that use it
 * (api-commands.ts) are thin: each is one or a few API calls, so the CLI can do nothing the API refuses.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliFailure, type CliIo, CliUsageError } from './io.ts';

export interface ApiTarget {
  /** e.g. http://127.0.0.1:8080 (no trailing slash). */
  base: string;
  token: string;
}

/**
 * `--api` (or HOOKRAIL_API_URL), else this machine's HOOKRAIL_HOST / HOOKRAIL_PORT. The key: `--token` (or
 * HOOKRAIL_TOKEN); for operator commands, else HOOKRAIL_ADMIN_TOKEN, or — only when talking to this machine's own
 * Hookrail (no `--api`, no HOOKRAIL_API_URL) — the token file `hookrail start` wrote in the data directory
 * (`--data-dir`, HOOKRAIL_DATA_DIR, ./data). A local token file is never sent to another host.
 */
export function apiTarget(
  flags: { api?: string | undefined; token?: string | undefined; 'data-dir'?: string | undefined },
  io: CliIo,
  operator: boolean,
): ApiTarget {
  const env = io.env;
  const host = env.HOOKRAIL_HOST || '127.0.0.1';
  const given = flags.api ?? env.HOOKRAIL_API_URL;
  const local = `http://${host.includes(':') ? `[${host}]` : host}:${env.HOOKRAIL_PORT || '8080'}`;
  const base = (given ?? local).replace(/\/+$/, '');
  const operatorToken = () =>
    env.HOOKRAIL_ADMIN_TOKEN ?? (given ? undefined : tokenFile(flags['data-dir'], env));
  const token = flags.token ?? env.HOOKRAIL_TOKEN ?? (operator ? operatorToken() : undefined);
  if (!token) {
    throw new CliUsageError(
      operator
        ? 'no operator token: pass --token or set HOOKRAIL_ADMIN_TOKEN (the admin-token file of the data directory ' +
            'is read only for the local Hookrail, without --api)'
        : 'no API key: pass --token or set HOOKRAIL_TOKEN',
    );
  }
  return { base, token };
}

function tokenFile(dataDir: string | undefined, env: CliIo['env']): string | undefined {
  try {
    return readFileSync(join(dataDir ?? env.HOOKRAIL_DATA_DIR ?? './data', 'admin-token'), 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** An answer the API gave with an error status: its stable code, message and details. */
export class ApiFailure extends CliFailure {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown,
  ) {
    super(`${code}: ${message}`);
  }
}

/** A request body already serialised: JSON text kept as the user wrote it (event data with big integers, `1.10`). */
export class JsonText {
  constructor(readonly text: string) {}
}

/** One API call; JSON in and out. Error answers throw ApiFailure; a 204 returns null. */
export async function call<T = unknown>(
  target: ApiTarget,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  let res: Response;
  try {
    res = await fetch(`${target.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${target.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: body instanceof JsonText ? body.text : JSON.stringify(body) }),
    });
  } catch (err) {
    throw new CliFailure(`cannot reach Hookrail at ${target.base}: ${(err as Error).cause ?? err}`);
  }
  if (res.status === 204) return null as T;
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    throw new CliFailure(`${method} ${path}: HTTP ${res.status} with a body that is not JSON`);
  }
  if (!res.ok) {
    const e = (json as { error?: { code?: string; message?: string; details?: unknown } } | null)?.error;
    throw new ApiFailure(
      res.status,
      e?.code ?? `http_${res.status}`,
      e?.message ?? res.statusText,
      e?.details,
    );
  }
  return json as T;
}
