/**
 * The published egress ranges (PRODUCT.md §7, ADR-11): the source addresses delivery traffic leaves from, for
 * consumers who allow-list inbound traffic. Anything a consumer writes into a firewall is an API, so the ranges are
 * a versioned file (egress-ranges.json, or HOOKRAIL_EGRESS_RANGES_FILE) with a change record per version
 * (docs/interface-changes/, enforced by scripts/check-interface-changes.ts), served here without credentials so
 * consumers can automate their allow-lists.
 *
 * The file is read and validated once, when the route is registered: an invalid file stops the process at
 * startup with a message naming the file and the problem, rather than publishing something a consumer would copy.
 */
import { readFileSync } from 'node:fs';
import { type Static, Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { FastifyInstance } from 'fastify';
import { DEFAULT_EGRESS_RANGES_FILE } from '../../config/config.ts';
import { parseCidr } from '../../domain/address-policy.ts';

/** Where a version's change record lives, relative to the repository (or deployment) root. */
export const CHANGE_RECORD_PATTERN = '^docs/interface-changes/[0-9]{4}-[a-z0-9][a-z0-9-]*\\.md$';
const UTC_TIMESTAMP = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z$';
const DATE = '^[0-9]{4}-[0-9]{2}-[0-9]{2}$';

const Cidr = Type.String({
  minLength: 1,
  maxLength: 49,
  description: 'An IPv4 or IPv6 network in CIDR notation (a bare address is a single host).',
});

export const EgressRegion = Type.Object(
  {
    name: Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,62}$' }),
    role: Type.Union([Type.Literal('active'), Type.Literal('standby')], {
      description:
        'active: delivery traffic leaves from these ranges now. standby: the failover region; published in ' +
        'advance so that a failover is a routing change, not an allow-list change.',
    }),
    cidrs: Type.Array(Cidr, {
      minItems: 1,
      description: 'Every range traffic from this region may come from. Allow all of them.',
    }),
    deprecated: Type.Optional(
      Type.Array(
        Type.Object(
          {
            cidr: Cidr,
            remove_after: Type.String({
              pattern: DATE,
              description: 'Still used until this date (UTC); keep it allowed until then.',
            }),
          },
          { additionalProperties: false },
        ),
        {
          description:
            'Ranges in `cidrs` that are being retired. During the deprecation window old and new ranges are ' +
            'both in use.',
        },
      ),
    ),
  },
  { additionalProperties: false },
);

export const EgressRanges = Type.Object(
  {
    version: Type.Integer({ minimum: 1, description: 'Incremented on every change of the ranges.' }),
    published_at: Type.String({ pattern: UTC_TIMESTAMP, description: 'UTC timestamp of this version.' }),
    notice: Type.Optional(Type.String({ maxLength: 2000 })),
    regions: Type.Array(EgressRegion, { minItems: 1 }),
    change_record: Type.String({
      pattern: CHANGE_RECORD_PATTERN,
      description: 'The interface-change record that announced this version and its deprecation window.',
    }),
  },
  { additionalProperties: false },
);
export type EgressRangesDocument = Static<typeof EgressRanges>;

export class EgressRangesError extends Error {
  constructor(
    readonly file: string,
    problems: readonly string[],
  ) {
    super(
      `egress ranges file ${file} is not valid (set HOOKRAIL_EGRESS_RANGES_FILE to a valid file; ` +
        `see docs/security.md): ${problems.join('; ')}`,
    );
    this.name = 'EgressRangesError';
  }
}

/** Parses and validates an egress ranges document; throws EgressRangesError listing every problem found. */
export function parseEgressRanges(text: string, file: string): EgressRangesDocument {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new EgressRangesError(file, [`not valid JSON (${(err as Error).message})`]);
  }
  const schemaProblems = [...Value.Errors(EgressRanges, doc)]
    .slice(0, 10)
    .map((e) => `${e.path || '/'}: ${e.message}`);
  if (schemaProblems.length > 0) throw new EgressRangesError(file, schemaProblems);
  const ranges = doc as EgressRangesDocument;

  const problems: string[] = [];
  if (Number.isNaN(Date.parse(ranges.published_at))) problems.push('/published_at: not a real date');
  if (!ranges.regions.some((r) => r.role === 'active')) problems.push('/regions: no region is active');
  const names = new Set<string>();
  ranges.regions.forEach((region, i) => {
    if (names.has(region.name)) problems.push(`/regions/${i}/name: "${region.name}" appears twice`);
    names.add(region.name);
    const cidrs = new Set<string>();
    region.cidrs.forEach((cidr, j) => {
      try {
        parseCidr(cidr);
      } catch (err) {
        problems.push(`/regions/${i}/cidrs/${j}: ${(err as Error).message}`);
      }
      if (cidrs.has(cidr)) problems.push(`/regions/${i}/cidrs/${j}: "${cidr}" appears twice`);
      cidrs.add(cidr);
    });
    region.deprecated?.forEach((d, j) => {
      if (!cidrs.has(d.cidr)) {
        problems.push(`/regions/${i}/deprecated/${j}: "${d.cidr}" is not in this region's cidrs`);
      }
      if (Number.isNaN(Date.parse(`${d.remove_after}T00:00:00Z`))) {
        problems.push(`/regions/${i}/deprecated/${j}/remove_after: not a real date`);
      }
    });
  });
  if (problems.length > 0) throw new EgressRangesError(file, problems);
  return ranges;
}

export function loadEgressRanges(file: string): EgressRangesDocument {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new EgressRangesError(file, [`cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`]);
  }
  return parseEgressRanges(text, file);
}

export const egressRangeRoutes =
  (opts: { egressRangesFile?: string | undefined }) => async (app: FastifyInstance) => {
    const ranges = loadEgressRanges(opts.egressRangesFile ?? DEFAULT_EGRESS_RANGES_FILE);

    app.get(
      '/v1/egress-ranges',
      {
        config: { public: true },
        schema: {
          summary: 'The address ranges deliveries come from (public)',
          description:
            'Allow-list these ranges if your endpoint only accepts traffic from known sources: every region, ' +
            'active and standby, so that a regional failover needs no change on your side. Versioned; a change ' +
            'is announced with a deprecation window during which old and new ranges are both in use.',
          tags: ['public'],
          security: [],
          response: { 200: EgressRanges },
        },
      },
      async (_req, reply) => {
        reply.header('cache-control', 'public, max-age=300');
        return ranges;
      },
    );
  };
