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
        summary: 'Exchange a TOTP code for a step-up token valid 5 minutes (tenant, operator)',
        description:
          "A tenant's code comes from the authenticator app enrolled with the seed shown at tenant creation; the " +
          "operator's from the one enrolled with its own seed (`HOOKRAIL_ADMIN_TOTP_SEED`, or the one printed at " +
          'first start). Send the token as `X-Step-Up-Token` on elevated calls (a tenant: changing an endpoint URL, ' +
          "replacing its own key; the operator: deleting a tenant). A tenant's token is not the operator's, nor the " +
          'other way round. A code is accepted once; wrong codes answer 403 `invalid_totp`, and after 5 wrong codes ' +
          'in 5 minutes, 429 with Retry-After.',
        tags: ['auth'],
        body: StepUpRequest,
        response: { 200: StepUpToken, ...errorResponses(400, 401, 403, 415, 429) },
      },
    },
    async (req) => {
      const p = req.principal;
      const tenantId = p.kind === 'operator' ? null : requireTenant(p);
      const { token, expiresAt } = await issueStepUpToken(deps, { tenantId, totp: req.body.totp });
      return { token, expires_at: iso(expiresAt) };
    },
  );
};
