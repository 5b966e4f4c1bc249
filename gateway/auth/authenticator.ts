import { ForbiddenError, UnauthenticatedError } from '../../shared/errors.js';
import type { Authenticator } from '../http/http-server.js';
import type { RouteDefinition } from '../http/route.js';
import type { Principal } from './principal.js';
import type { TokenService } from './token-service.js';

/** A write is any route that changes state; read-only credentials may not call it. */
export const isWriteRoute = (route: RouteDefinition): boolean => route.write ?? route.method !== 'GET';

/** Turns a `Authorization: Bearer <JWT>` header into a principal. */
export function createAuthenticator(tokens: TokenService): Authenticator {
  return async (headers, route) => {
    const authorization = headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw new UnauthenticatedError('Send Authorization: Bearer <access token>');
    const claims = await tokens.verify(match[1]!);
    const principal: Principal = {
      userId: claims.sub,
      email: claims.email,
      organizationId: claims.organization_uuid,
      role: claims.role,
      platformAdmin: claims.platform_admin === true,
      permission: claims.api_permission,
      via: 'jwt',
    };
    if (principal.permission === 'read-only' && isWriteRoute(route)) throw new ForbiddenError('This credential is read-only');
    return principal;
  };
}
