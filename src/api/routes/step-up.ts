import type { FastifyInstance } from 'fastify';
import { requireTenant } from '../../app/manage-endpoints.ts';
import { issueStepUpToken } from '../../app/step-up.ts';
import type { ApiDeps } from '../build-api.ts';
import { StepUpRequest, StepUpToken } from '../control-schemas.ts';
import { errorResponses, iso } from '../schemas.ts';

export const stepUpRoutes = (deps: ApiDeps) => async (app: FastifyInstance) => {
  app.post<{ Body: { totp: string } }>(
    '/v1/auth/step-up',
    {
      schema: {
        summary: 'Exchange a TOTP code for a step-up token valid 5 minutes (tenant)',
        description:
          'The code comes from the authenticator app enrolled with the seed shown at tenant creation. Send the ' +
          'token as `X-Step-Up-Token` on elevated calls (changing an endpoint URL). A code is accepted once; ' +
          'wrong codes answer 403 `invalid_totp`, and after 5 wrong codes in 5 minutes, 429 with Retry-After.',
        tags: ['auth'],
        body: StepUpRequest,
        response: { 200: StepUpToken, ...errorResponses(400, 401, 403, 415, 429) },
      },
    },
    async (req) => {
      const tenantId = requireTenant(req.principal);
      const { token, expiresAt } = await issueStepUpToken(deps, { tenantId, totp: req.body.totp });
      return { token, expires_at: iso(expiresAt) };
    },
  );
};
