/**
 * Hookrail as a real child process (`node bin/hookrail.js …`) for end-to-end tests: spawned with an explicit
 * environment, ready once it prints `listening on http://…`, killed with any signal, its stdout/stderr kept for
 * diagnostics. Every child is registered; `useHookrailProcesses()` kills whatever a test left running and prints
 * the output of the children of a failed test.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach } from 'vitest';
import { dropSchema, freshSchemaName } from './postgres.ts';

export const BIN = fileURLToPath(new URL('../../bin/hookrail.js', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Keep at most this much of each stream (the tail is what explains a failure). */
const MAX_OUTPUT = 256 * 1024;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * The environment of a child: the parent's, minus every Hookrail setting and DATABASE_URL (vitest's global setup
 * exports one; a SQLite child must not inherit it), plus `env`. Defaults: a port of its own (0 = the kernel picks a
 * free one, read back from the `listening on` line) on 127.0.0.1, and warn-level logs.
 */
export function childEnv(env: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'DATABASE_URL' || k.startsWith('HOOKRAIL_')) continue;
    // vitest marks its workers; a child that sees these might think it is a test worker.
    if (k.startsWith('VITEST') || k === 'NODE_OPTIONS') continue;
    out[k] = v;
  }
  Object.assign(out, { HOOKRAIL_PORT: '0', HOOKRAIL_HOST: '127.0.0.1', HOOKRAIL_LOG_LEVEL: 'warn' });
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete out[k];
    else out[k] = v;
  }
  return out;
}

export class HookrailProcess {
  readonly child: ChildProcess;
  readonly name: string;
  readonly startedAt = Date.now();
  stdout = '';
  stderr = '';
  exit: Exit | null = null;
  /** Resolves when the process has exited (never rejects). */
  readonly exited: Promise<Exit>;
  private listeners: Array<() => void> = [];

  constructor(args: string[], env: NodeJS.ProcessEnv, name: string) {
    this.name = name;
    this.child = spawn(process.execPath, [BIN, ...args], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const append = (which: 'stdout' | 'stderr') => (chunk: Buffer) => {
      const next = this[which] + chunk.toString('utf8');
      this[which] = next.length > MAX_OUTPUT ? next.slice(next.length - MAX_OUTPUT) : next;
      for (const l of this.listeners) l();
    };
    this.child.stdout?.on('data', append('stdout'));
    this.child.stderr?.on('data', append('stderr'));
    this.exited = new Promise((resolve) => {
      const done = (exit: Exit) => {
        if (this.exit) return;
        this.exit = exit;
        live.delete(this);
        for (const l of this.listeners) l();
        resolve(exit);
      };
      this.child.on('exit', (code, signal) => done({ code, signal }));
      this.child.on('error', () => done({ code: null, signal: null }));
    });
    live.add(this);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.exit === null;
  }

  /** Calls `check` whenever output arrives or the process exits, until it returns a value or the time is up. */
  waitFor<T>(check: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const listener = () => {
        let value: T | undefined;
        try {
          value = check();
        } catch (err) {
          finish();
          reject(err);
          return;
        }
        if (value !== undefined) {
          finish();
          resolve(value);
        } else if (this.exit) {
          finish();
          reject(
            new Error(`${this.name} exited (${describeExit(this.exit)}) before ${what}\n${this.output()}`),
          );
        }
      };
      const finish = () => {
        clearTimeout(timer);
        this.listeners = this.listeners.filter((l) => l !== listener);
      };
      timer = setTimeout(() => {
        finish();
        reject(new Error(`${this.name}: no ${what} within ${timeoutMs} ms\n${this.output()}`));
      }, timeoutMs);
      this.listeners.push(listener);
      listener();
    });
  }

  /** Sends `signal` (SIGKILL unless told) and waits for the exit. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<Exit> {
    if (this.exit) return this.exit;
    this.child.kill(signal);
    return this.exited;
  }

  /** Both streams, labelled, for failure messages. */
  output(maxChars = 8_000): string {
    const tail = (s: string) => (s.length > maxChars ? `…${s.slice(s.length - maxChars)}` : s);
    return (
      `--- ${this.name} (pid ${this.pid}${this.exit ? `, ${describeExit(this.exit)}` : ', running'}) stdout ---\n` +
      `${tail(this.stdout)}\n--- ${this.name} stderr ---\n${tail(this.stderr)}`
    );
  }
}

export function describeExit(exit: Exit): string {
  return exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
}

const live = new Set<HookrailProcess>();
/** Every child spawned in the current test (for diagnostics when it fails). */
let spawnedInTest: HookrailProcess[] = [];
let counter = 0;

export interface RunningHookrail extends HookrailProcess {
  /** `http://127.0.0.1:<port>` from the `listening on` line. */
  url: string;
}

/**
 * `hookrail start` as a child process; resolves once it is listening. `args` are extra flags after `start`.
 * Rejects (with the child's output) if it exits first or is not ready within `readyTimeoutMs`.
 */
export async function spawnHookrail(
  opts: {
    env?: Record<string, string | undefined>;
    args?: string[];
    readyTimeoutMs?: number;
    name?: string;
  } = {},
): Promise<RunningHookrail> {
  const proc = new HookrailProcess(
    ['start', ...(opts.args ?? [])],
    childEnv(opts.env),
    opts.name ?? `hookrail#${++counter}`,
  );
  spawnedInTest.push(proc);
  const url = await proc.waitFor(
    () => /listening on (http:\/\/\S+)/.exec(proc.stdout)?.[1],
    opts.readyTimeoutMs ?? 20_000,
    '"listening on" line',
  );
  return Object.assign(proc, { url });
}

/** A one-shot CLI command (`--version`, `migrate`, …): its exit and output; SIGKILLed after `timeoutMs`. */
export async function runHookrail(
  args: string[],
  opts: { env?: Record<string, string | undefined>; timeoutMs?: number } = {},
): Promise<Exit & { stdout: string; stderr: string }> {
  const proc = new HookrailProcess(args, childEnv(opts.env), `hookrail ${args.join(' ')}`);
  spawnedInTest.push(proc);
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), opts.timeoutMs ?? 20_000);
  const exit = await proc.exited;
  clearTimeout(timer);
  return { ...exit, stdout: proc.stdout, stderr: proc.stderr };
}

/** SIGKILLs every child still running and waits until they are gone. */
export async function killAllHookrails(): Promise<void> {
  await Promise.all([...live].map((p) => p.kill('SIGKILL')));
}

/**
 * Registers the hooks every end-to-end file needs: after each test, print the output of its children if it failed,
 * then kill whatever is still running; after all, make sure nothing leaked.
 */
export function useHookrailProcesses(): void {
  afterEach(async (ctx) => {
    const mine = spawnedInTest;
    spawnedInTest = [];
    await killAllHookrails();
    if (ctx.task.result?.state === 'fail') {
      for (const p of mine) process.stderr.write(`${p.output()}\n`);
    }
  });
  afterAll(async () => {
    await killAllHookrails();
  });
}

/** What a test file leaves to undo after its tests: directories, schemas, servers. */
export type Cleanups = Array<() => Promise<void> | void>;

/** A list of cleanups that an `afterAll` of the calling file runs, the last registered first. */
export function useCleanups(): Cleanups {
  const cleanups: Cleanups = [];
  afterAll(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return cleanups;
}

/** A fresh temporary directory (`hookrail-e2e-<label>-…`), removed after the file's tests. */
export function tempDir(cleanups: Cleanups, label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `hookrail-e2e-${label}-`));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A fresh PostgreSQL schema for child processes. The CLI only takes DATABASE_URL, so the schema travels in the URL
 * as libpq's `options` parameter (`?options=-c search_path=<schema>`), which pg passes to the server at connect.
 * The schema is created here because a store without a schema option migrates into the search_path as it is.
 */
export async function createChildSchema(
  baseUrl: string,
  prefix = 'e2e',
): Promise<{ schema: string; url: string; drop(): Promise<void> }> {
  const schema = freshSchemaName(prefix);
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA "${schema}"`);
  } finally {
    await client.end();
  }
  return { schema, url: withSearchPath(baseUrl, schema), drop: () => dropSchema(baseUrl, schema) };
}

/** `url` with `options=-c search_path=<schema>` (replacing any `options` it had). */
export function withSearchPath(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return u.toString();
}
