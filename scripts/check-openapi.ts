/**
 * The OpenAPI document is generated from the route schemas; docs/openapi.json is the committed copy that readers
 * and client generators use. This fails when the two differ (run `npm run openapi:write` to refresh the copy).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { generateOpenApi } from '../test/support/openapi.ts';

const file = resolve(import.meta.dirname, '../docs/openapi.json');
const generated = `${JSON.stringify(await generateOpenApi(), null, 2)}\n`;

if (process.argv.includes('--write')) {
  writeFileSync(file, generated);
  process.stdout.write(`wrote ${file}\n`);
} else {
  let committed = '';
  try {
    committed = readFileSync(file, 'utf8');
  } catch {}
  if (committed !== generated) {
    process.stderr.write('docs/openapi.json is out of date: run `npm run openapi:write` and commit it.\n');
    process.exit(1);
  }
  process.stdout.write('openapi document up to date\n');
}
