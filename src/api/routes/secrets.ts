import type { FastifyInstance } from 'fastify';
import { readScope } from '../../app/auth.ts';
import {
  DEFAULT_ROTATION_OVERLAP_SECONDS,
  listSecrets,
  requireTenant,
  retireSecret,
  rotateSecret,
} from '../../app/manage-endpoints.ts';
import type { ApiDeps } from '../build-api.ts';
import {
  bodyOptional,
  isoOrNull,
  SecretList,
  SecretParams,
  SecretRotate,
  SecretRotated,
} from '../control-schemas.ts';
import { errorResponses, IdParams } from '../schemas.ts';
import { secretJson } from './endpoints.ts';

export const secretRoutes = (deps: ApiDeps) => async (app: FastifyInstance) => {
  app.post<{ Params: { id: string }; Body: { overlap_seconds?: number } }>(
    '/v1/endpoints/:id/secrets',
    {
      preValidation: bodyOptional,
      schema: {
        summary: 'Rotate the signing secret (tenant); the new secret is in this answer only',
        description:
          'Deliveries are signed with the new secret within seconds (a delivery worker re-reads secrets at least ' +
          'every HOOKRAIL_SECRET_CACHE_MS, 5 s by default) and, until `previous.active_until`, with the previous ' +
          'one too (both signatures in one `webhook-signature` header), so consumers can switch without a gap. At ' +
          'most two secrets are active: rotating again retires the oldest at once. The body is optional.',
        tags: ['secrets'],
        params: IdParams,
        body: SecretRotate,
        response: { 201: SecretRotated, ...errorResponses(400, 401, 403, 404, 415, 503) },
      },
    },
    async (req, reply) => {
      const rotated = await rotateSecret(deps, {
        by: { tenantId: requireTenant(req.principal), principal: req.principal },
        endpointId: req.params.id,
        overlapSeconds: req.body.overlap_seconds ?? DEFAULT_ROTATION_OVERLAP_SECONDS,
      });
      return reply.status(201).send({
        ...secretJson(rotated.secret),
        secret: rotated.secretValue,
        previous: rotated.previous
          ? { id: rotated.previous.id, active_until: isoOrNull(rotated.previous.activeUntil) }
          : null,
      });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/endpoints/:id/secrets',
    {
      schema: {
        summary: 'List the active signing secrets, newest first (metadata only; never the secret)',
        tags: ['secrets'],
        params: IdParams,
        response: {
          200: SecretList,
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (req) => {
      const secrets = await listSecrets(deps, {
        tenantId: readScope(req.principal),
        endpointId: req.params.id,
      });
      return { data: secrets.map(secretJson), next_cursor: null };
    },
  );

  app.delete<{ Params: { id: string; sid: string } }>(
    '/v1/endpoints/:id/secrets/:sid',
    {
      schema: {
        summary: 'Retire a signing secret early (tenant); the last active one cannot be retired',
        description:
          'Ends the secret now. The endpoint is never left without a secret once the overlap ends: retiring the ' +
          'new secret of a rotation during its overlap undoes the rotation, and the previous secret stays active ' +
          'with no end (`active_until` null). The last active secret cannot be retired (409 `last_active_secret`).',
        tags: ['secrets'],
        params: SecretParams,
        response: { 204: { type: 'null' }, ...errorResponses(401, 403, 404, 409) },
      },
    },
    async (req, reply) => {
      const by = { tenantId: requireTenant(req.principal), principal: req.principal };
      await retireSecret(deps, { by, endpointId: req.params.id, secretId: req.params.sid });
      return reply.status(204).send();
    },
  );
};
