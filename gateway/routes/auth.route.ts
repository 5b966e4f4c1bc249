import { z } from 'zod';
import { ForbiddenError, NotFoundError, UnauthenticatedError } from '../../shared/errors.js';
import { API_KEY_PERMISSIONS, ApiKeySchema, UserSchema, type ApiKey, type User } from '../../shared/storage/entities/index.js';
import { can, mayChangeUser } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import { listParam, uuidParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const tokenPairSchema = z.object({ access_token: z.string(), refresh_token: z.string() });

const apiKeySchema = z.object({
  id: z.uuid(),
  apikey: z.string().describe('The key: shown in full only in the creation response, masked afterwards'),
  permission: z.enum(API_KEY_PERMISSIONS),
  description: z.string(),
  user_id: z.uuid(),
  created_at: z.iso.datetime(),
  last_used_at: z.iso.datetime().nullable(),
  requests_per_second: z
    .number()
    .int()
    .nullable()
    .describe("This key's request budget per second; null: the deployment's RATE_LIMIT_REQUESTS_PER_SECOND"),
  poses_per_second: z
    .number()
    .int()
    .nullable()
    .describe("This key's uploaded-pose budget per second; null: the deployment's RATE_LIMIT_POSES_PER_SECOND"),
});

const presentApiKey = (apiKey: ApiKey, clearKey?: string) => ({
  id: apiKey.id,
  apikey: clearKey ?? apiKey.keyHint,
  permission: apiKey.permission,
  description: apiKey.description,
  user_id: apiKey.user.id,
  created_at: apiKey.createdAt.toISOString(),
  last_used_at: apiKey.lastUsedAt?.toISOString() ?? null,
  requests_per_second: apiKey.requestsPerSecond ?? null,
  poses_per_second: apiKey.posesPerSecond ?? null,
});

/** The audit fields of a security event about `user`. */
const securityEventOf = (user: User, via: string, method: string, route: string, address: string) => ({
  organizationId: typeof user.organization === 'object' ? user.organization.id : (user.organization as string),
  userId: user.id,
  email: user.email,
  via,
  method,
  route,
  address,
});

/** Basic `email:password`, decoded; undefined when the header is not Basic. */
function basicCredentials(authorization: string | undefined): { email: string; password: string } | undefined {
  const match = /^Basic\s+(\S+)$/i.exec(authorization ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 1) throw new UnauthenticatedError('Malformed Basic credentials');
  return { email: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Resolves whose keys a request is about: the caller by default, another user of the organization for admins. */
async function keyOwner(services: GatewayServices, principal: Principal, userId: string | undefined) {
  if (userId !== undefined && userId !== principal.userId && !can(principal.role, 'apikeys:others')) {
    throw new ForbiddenError('Only administrators manage other users’ API keys');
  }
  const owner = await services.storage.em().findOne(UserSchema, { id: userId ?? principal.userId, organization: principal.organizationId });
  if (!owner) throw new NotFoundError('User');
  if (!mayChangeUser(principal, owner)) throw new ForbiddenError('Only the platform administrator manages its API keys');
  return owner;
}

/** Credentials (spec 4.1 and 5): access tokens, refresh rotation, API keys. */
export function authRoutes(services: GatewayServices) {
  const { credentials } = services;
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/access_tokens',
      summary:
        'Get an access token (JWT, 4 days) and a refresh token: HTTP Basic email:password (409 ambiguous_credentials when that pair opens accounts in several organizations), or X-API-KEY (optionally with X-API-EMAIL)',
      tags: ['credentials'],
      auth: 'public',
      signIn: true,
      response: tokenPairSchema,
      handler: async ({ headers, remoteAddress, method, path }) => {
        const basic = basicCredentials(headers.authorization);
        if (basic) {
          const user = await credentials.loginWithPassword(basic.email, basic.password, remoteAddress, (user, ok) =>
            services.securityAudit.record({
              ...securityEventOf(user, 'basic', method, path, remoteAddress),
              kind: ok ? 'sign-in' : 'sign-in-failed',
            }),
          );
          return { body: await credentials.issueTokens(user, 'read-write') };
        }
        if (headers['x-api-key']) {
          const { user, apiKey } = await credentials.loginWithApiKey(headers['x-api-key'], headers['x-api-email']);
          return { body: await credentials.issueTokens(user, apiKey.permission, apiKey) };
        }
        throw new UnauthenticatedError('Send Authorization: Basic <email:password>, or X-API-KEY');
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/refresh_access_tokens',
      summary:
        'Rotate an access/refresh token pair: the refresh token is then used up; presenting it again revokes its whole chain, access tokens included',
      tags: ['credentials'],
      auth: 'public',
      body: z.object({ access_token: z.string().min(1), refresh_token: z.string().min(1) }),
      response: tokenPairSchema,
      handler: async ({ body, method, path, remoteAddress }) => ({
        body: await credentials.refresh(body.access_token, body.refresh_token, async (user, familyId) => {
          // The chain's access tokens are refused and its sockets closed on every gateway before the 401.
          await services.authenticator.invalidate({ tokenFamilyId: familyId, revoke: true });
          await services.securityAudit.record({
            ...securityEventOf(user, 'jwt', method, path, remoteAddress),
            kind: 'refresh-reuse',
            detail: 'a used refresh token was presented again; its chain and its access tokens are revoked',
          });
        }),
      }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/auth/apikeys',
      summary: 'API keys of a user (default: the caller), masked',
      tags: ['credentials'],
      auth: 'authenticated',
      action: 'apikeys:own',
      query: z.object({
        user_id: uuidParam.optional().describe('Whose keys; administrators may name another user of their organization'),
        permissions: listParam(z.enum(API_KEY_PERMISSIONS)).optional().describe('Only keys with these permissions'),
      }),
      response: z.array(apiKeySchema),
      handler: async ({ principal, query }) => {
        const owner = await keyOwner(services, principal, query.user_id);
        const keys = await services.storage
          .em()
          .find(
            ApiKeySchema,
            { user: owner.id, ...(query.permissions ? { permission: { $in: query.permissions } } : {}) },
            { orderBy: { createdAt: 'asc' } },
          );
        return { body: keys.map((key) => presentApiKey(key)) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/apikeys',
      summary: 'Create an API key; the response is the only time the key is shown',
      tags: ['credentials'],
      auth: 'authenticated',
      action: 'apikeys:own',
      body: z.object({
        permission: z.enum(API_KEY_PERMISSIONS).default('read-only'),
        description: z.string().max(500).default(''),
        user_id: z.uuid().optional(),
        requests_per_second: z
          .number()
          .int()
          .min(1)
          .max(services.config.RATE_LIMIT_MAX_REQUESTS_PER_SECOND)
          .nullable()
          .optional()
          .describe(
            "Administrators only: this key's request budget, instead of the deployment's (at most RATE_LIMIT_MAX_REQUESTS_PER_SECOND; rounded down to 1, 2 or 5 × 10^n)",
          ),
        poses_per_second: z
          .number()
          .int()
          .min(1)
          .max(services.config.RATE_LIMIT_MAX_POSES_PER_SECOND)
          .nullable()
          .optional()
          .describe(
            "Administrators only: this key's uploaded-pose budget, instead of the deployment's (at most RATE_LIMIT_MAX_POSES_PER_SECOND; rounded down to 1, 2 or 5 × 10^n)",
          ),
      }),
      response: apiKeySchema,
      successStatus: 201,
      handler: async ({ principal, body, audit }) => {
        const owner = await keyOwner(services, principal, body.user_id);
        // A credential cannot mint a stronger one than itself.
        if (principal.permission !== 'read-write') throw new ForbiddenError('Only a read-write credential may create API keys');
        if ((body.requests_per_second != null || body.poses_per_second != null) && !can(principal.role, 'apikeys:rates')) {
          throw new ForbiddenError('Only administrators set the rate limits of an API key');
        }
        const { apiKey, key } = await credentials.createApiKey(
          owner,
          body.permission,
          body.description,
          { requestsPerSecond: body.requests_per_second, posesPerSecond: body.poses_per_second },
          // Masked as the list shows it (and `apikey` is a secret-named field, redacted anyway): no key material in the log.
          (tx, created) => audit.record(tx, { objectType: 'apikeys', objectId: created.id, before: null, after: presentApiKey(created) }),
        );
        return { status: 201, body: presentApiKey(apiKey, key) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/auth/apikeys/:id',
      summary:
        'Revoke an API key: its requests, the tokens minted from it and their refresh chains are refused at once, and its open WebSockets closed (4401)',
      tags: ['credentials'],
      auth: 'authenticated',
      action: 'apikeys:own',
      params: z.object({ id: uuidParam }),
      handler: async ({ principal, params, audit }) => {
        const apiKey = await services.storage.em().transactional(async (em) => {
          const apiKey = await em.findOne(ApiKeySchema, { id: params.id, organization: principal.organizationId }, { populate: ['user'] });
          if (!apiKey || (apiKey.user.id !== principal.userId && !can(principal.role, 'apikeys:others')))
            throw new NotFoundError('API key');
          if (!mayChangeUser(principal, apiKey.user)) throw new ForbiddenError('Only the platform administrator manages its API keys');
          const before = presentApiKey(apiKey);
          em.remove(apiKey);
          await em.flush();
          await audit.record(em, { objectType: 'apikeys', objectId: apiKey.id, before, after: null });
          return apiKey;
        });
        await services.authenticator.invalidate({ apiKeyHash: apiKey.keyHash, apiKeyId: apiKey.id, revoke: true });
        return { status: 204 };
      },
    }),
  ];
}
