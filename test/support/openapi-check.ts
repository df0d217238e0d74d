/**
 * Checks an API answer against the published document (docs/openapi.json): its status must be one the operation
 * lists, and its JSON body must match the schema listed for that status. test-hookrail.ts runs it on every request
 * a test makes through `TestApp.request`, so every route test also tests the document.
 */
import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

const DOC = JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Record<string, Operation>>;
};

const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addFormat('date-time', (s: string) => !Number.isNaN(Date.parse(s)));
ajv.addSchema(DOC as object, 'openapi.json');

/** Path templates (`/v1/endpoints/{id}`) as patterns, most literal segments first (`/x/test` before `/x/{id}`). */
const ROUTES = Object.keys(DOC.paths)
  .map((template) => ({
    template,
    literal: template.split('/').filter((s) => !s.startsWith('{')).length,
    pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
  }))
  .sort((a, b) => b.literal - a.literal);

const validators = new Map<string, ValidateFunction>();
const pointer = (...parts: string[]) =>
  parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

/** Why the answer does not match the document; null when it does, or when the route is not in it (404 expected). */
export function openApiMismatch(method: string, url: string, status: number, body: unknown): string | null {
  const path = url.split('?')[0]!;
  if (!path.startsWith('/v1/')) return null; // health, metrics and the document itself are not API operations
  const route = ROUTES.find((r) => r.pattern.test(path));
  const op = route && DOC.paths[route.template]![method.toLowerCase()];
  if (!route || !op) {
    return status === 404 || status === 401 || status === 503
      ? null
      : `${method} ${path} is not in docs/openapi.json, but answered ${status}`;
  }
  const listed = op.responses[String(status)];
  if (!listed) {
    return `${method} ${route.template} answered ${status}, which docs/openapi.json does not list (it lists ${Object.keys(op.responses).join(', ')})`;
  }
  if (!listed.content?.['application/json']?.schema) return null;
  const key = `${route.template} ${method} ${status}`;
  let validate = validators.get(key);
  if (!validate) {
    const ref = `openapi.json#/${pointer('paths', route.template, method.toLowerCase(), 'responses', String(status), 'content', 'application/json', 'schema')}`;
    validate = ajv.compile({ $ref: ref });
    validators.set(key, validate);
  }
  const v = validate;
  if (v(body)) return null;
  return `${method} ${route.template} ${status}: the body does not match docs/openapi.json: ${ajv.errorsText(v.errors)}\n${JSON.stringify(body).slice(0, 500)}`;
}
