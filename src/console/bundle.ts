/**
 * The console's browser code (src/console/app, TypeScript) as one ES module, built with esbuild once per process
 * on first request. Hookrail runs its TypeScript sources directly (no build step), so the console follows: a
 * build of about fifty milliseconds, once, instead of shipped files that could drift from their source.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';

const DIR = import.meta.dirname;

export interface ConsoleAsset {
  body: Buffer;
  type: string;
  etag: string;
}

const asset = (body: Buffer, type: string): ConsoleAsset => ({
  body,
  type,
  etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
});

async function bundleApp(): Promise<ConsoleAsset> {
  const out = await build({
    entryPoints: [join(DIR, 'app', 'main.ts')],
    bundle: true,
    format: 'esm',
    target: 'es2022',
    minify: true,
    sourcemap: false,
    write: false,
    logLevel: 'silent',
    legalComments: 'none',
  });
  const file = out.outputFiles[0];
  if (!file) throw new Error('console bundle: esbuild wrote nothing');
  return asset(Buffer.from(file.contents), 'text/javascript; charset=utf-8');
}

const files: Record<string, () => Promise<ConsoleAsset>> = {
  'index.html': async () =>
    asset(await readFile(join(DIR, 'static', 'index.html')), 'text/html; charset=utf-8'),
  'console.css': async () =>
    asset(await readFile(join(DIR, 'static', 'console.css')), 'text/css; charset=utf-8'),
  'favicon.svg': async () => asset(await readFile(join(DIR, 'static', 'favicon.svg')), 'image/svg+xml'),
  'app.js': bundleApp,
};

export type ConsoleAssetName = keyof typeof files;
export const CONSOLE_ASSETS = Object.keys(files) as ConsoleAssetName[];

/** Loads each asset once; a failed load is not cached, so the next request tries again. */
export function consoleAssets(): (name: ConsoleAssetName) => Promise<ConsoleAsset> {
  const cache = new Map<ConsoleAssetName, Promise<ConsoleAsset>>();
  return (name) => {
    let p = cache.get(name);
    if (!p) {
      p = files[name]!();
      cache.set(name, p);
      p.catch(() => cache.delete(name));
    }
    return p;
  };
}
