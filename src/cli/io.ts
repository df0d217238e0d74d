/**
 * What a CLI command reads and writes, so that tests can run a command in-process with captured output and a
 * scripted answer to a prompt. `main.ts` wires it to the process.
 */
import { readFile } from 'node:fs/promises';

export interface CliIo {
  /** Results (JSON, one document per command). */
  out(text: string): void;
  /** Progress, prompts and errors. */
  err(text: string): void;
  env: Record<string, string | undefined>;
  /** A person is at a terminal: progress bars are drawn and questions may be asked. */
  interactive: boolean;
  /** Asks a yes/no question (only when interactive). */
  confirm(question: string): Promise<boolean>;
  /** Standard input, whole (for `-` in place of a file). */
  readStdin(): Promise<Buffer>;
}

/** A usage or input mistake: printed as `error: …` with exit code 2, without a stack. */
export class CliUsageError extends Error {}

/** A refusal or failure the command reports (exit code 1). */
export class CliFailure extends Error {}

/** A file's bytes, or standard input's for `-`; an unreadable file is a usage error. */
export async function readInput(path: string, io: CliIo): Promise<Buffer> {
  if (path === '-') return io.readStdin();
  try {
    return await readFile(path);
  } catch (err) {
    throw new CliUsageError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}
