/**
 * The web console (PRODUCT.md §9): a static page and its script, served by the control role under /console. The
 * page holds no data of its own: it calls this same API with the tenant key the user enters, kept in the tab's
 * sessionStorage and sent as a bearer token (no cookie, so no cross-site request can act with it). The policy
 * below allows only this origin's own script, styles and API: nothing inline, nothing framed.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { CONSOLE_ASSETS, type ConsoleAssetName, consoleAssets } from '../../console/bundle.ts';

const POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export const consoleRoutes = () => async (app: FastifyInstance) => {
  const load = consoleAssets();

  const send = async (name: ConsoleAssetName, ifNoneMatch: string | undefined, reply: FastifyReply) => {
    const a = await load(name);
    reply
      .header('content-security-policy', POLICY)
      .header('x-content-type-options', 'nosniff')
      .header('x-frame-options', 'DENY')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .header('etag', a.etag);
    if (ifNoneMatch === a.etag) return reply.status(304).send();
    return reply.type(a.type).send(a.body);
  };

  const page = { config: { public: true }, schema: { hide: true } };
  app.get('/console', page, async (_req, reply) => reply.redirect('/console/', 302));
  app.get('/console/', page, async (req, reply) => send('index.html', req.headers['if-none-match'], reply));
  for (const name of CONSOLE_ASSETS.filter((n) => n !== 'index.html')) {
    app.get(`/console/${name}`, page, async (req, reply) => send(name, req.headers['if-none-match'], reply));
  }
};
