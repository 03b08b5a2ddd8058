// The local stack's identity provider: node-oidc-provider with the client-credentials grant,
// issuing RS256 JWT access tokens (typ at+jwt) whose audience is the requested resource
// (default urn:lakekeeper). Configuration comes from a JSON file written by devstack/idp_config.py:
//   {port, issuer, token_ttl_s, audience, scope, clients: [{client_id, client_secret}], jwk}
// The signing key is generated once per stack by the launcher and reused on restart.
// Extra routes (not OIDC): GET /_idp/stats -> {"token_requests": n}, POST /_idp/stats/reset.
import fs from 'node:fs';
import Provider from 'oidc-provider';

const configPath = process.argv[2];
if (!configPath) {
  console.error('usage: node server.mjs <config.json>');
  process.exit(2);
}
const cfg = JSON.parse(fs.readFileSync(configPath, 'utf8'));
const ttl = Number(cfg.token_ttl_s);

const provider = new Provider(cfg.issuer, {
  clients: cfg.clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    // oidc-provider 9 accepts client_secret_post for a client_secret_basic client as well.
    token_endpoint_auth_method: 'client_secret_basic',
    scope: cfg.scope,
  })),
  jwks: { keys: [cfg.jwk] },
  scopes: cfg.scope.split(' '),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => cfg.audience,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator) => ({
        scope: cfg.scope,
        audience: resourceIndicator,
        accessTokenTTL: ttl,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  ttl: { ClientCredentials: ttl },
});
provider.proxy = false;

// Exact counters for tests: every POST to the token endpoint counts, refused or not.
const stats = { token_requests: 0 };
provider.use(async (ctx, next) => {
  if (ctx.path === '/_idp/stats' && ctx.method === 'GET') {
    ctx.type = 'application/json';
    ctx.body = JSON.stringify(stats);
    return;
  }
  if (ctx.path === '/_idp/stats/reset' && ctx.method === 'POST') {
    stats.token_requests = 0;
    ctx.type = 'application/json';
    ctx.body = JSON.stringify(stats);
    return;
  }
  if (ctx.path === '/token' && ctx.method === 'POST') {
    stats.token_requests += 1;
  }
  await next();
});

const server = provider.listen(cfg.port, '127.0.0.1', () => {
  console.log(`idp listening ${cfg.issuer} ttl=${ttl}s clients=${cfg.clients.length}`);
});
const shutdown = () => {
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
