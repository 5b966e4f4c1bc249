import type { HttpRequest, HttpResponse, us_socket_context_t } from 'uWebSockets.js';
import { AppError, BadRequestError, toErrorBody, RateLimitedError, UnavailableError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { RequestAuthenticator } from '../auth/authenticator.js';
import { statusLine } from '../http/status-text.js';
import { bearerExpiry } from './credential-check.js';
import { SOCKET_ROUTE, type SocketAdmission } from './socket-admission.js';
import type { SocketData, WsOptions } from './ws-connection.js';
import { MSGPACK_SUBPROTOCOL, type WireFormat } from './ws-codec.js';

/**
 * The HTTP upgrade to /api/v1/ws, the one job of this file: it reads the wire format and frame shapes the
 * client asks for, authenticates a Bearer or API-key header (a socket without one takes a slot of its
 * address's unauthenticated quota and must send `auth` in time), and answers a refusal as a JSON error body.
 */
export class WsUpgrade {
  /** False once shutdown starts: new sockets are refused with 503. */
  accepting = true;

  constructor(
    private readonly services: { logger: Logger; authenticator: Pick<RequestAuthenticator, 'authenticate'> },
    private readonly admission: SocketAdmission,
    private readonly options: Pick<WsOptions, 'maxUnauthenticatedPerAddress'>,
  ) {}

  upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const refuse = (error: unknown) => {
      if (aborted) return;
      if (!(error instanceof AppError)) this.services.logger.error({ err: error }, 'websocket upgrade failed');
      const body = toErrorBody(error);
      try {
        res.cork(() => res.writeStatus(statusLine(body.status)).writeHeader('content-type', 'application/json').end(JSON.stringify(body)));
      } catch (again) {
        this.services.logger.error({ err: again }, 'websocket upgrade refusal failed');
      }
    };
    let reserved: string | undefined;
    const release = () => {
      if (reserved !== undefined) this.admission.releaseUnauthenticated(reserved);
      reserved = undefined;
    };
    try {
      const headers: Record<string, string> = {};
      req.forEach((name, value) => {
        headers[name] = value;
      });
      const address = Buffer.from(res.getRemoteAddressAsText()).toString();
      const key = headers['sec-websocket-key'] ?? '';
      const extensions = headers['sec-websocket-extensions'] ?? '';
      const offered = (headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
      const format: WireFormat = offered.includes(MSGPACK_SUBPROTOCOL) ? 'msgpack' : 'json';
      const protocol = format === 'msgpack' ? MSGPACK_SUBPROTOCOL : offered.includes('json') ? 'json' : '';
      const positions = req.getQuery('positions') || 'single';
      const events = req.getQuery('events') || 'single';
      if (!this.accepting) return refuse(new UnavailableError('The server is shutting down'));
      if (positions !== 'single' && positions !== 'batched') return refuse(new BadRequestError('positions must be single or batched'));
      if (events !== 'single' && events !== 'batched') return refuse(new BadRequestError('events must be single or batched'));
      const credentials = headers.authorization || headers['x-api-key'];
      if (!credentials) {
        // Reserved now, not on open: upgrades from one address may be in progress together.
        if (!this.admission.reserveUnauthenticated(address)) {
          const max = this.options.maxUnauthenticatedPerAddress;
          return refuse(
            new RateLimitedError(`Too many unauthenticated sockets from your address (at most ${max}): authenticate or close some first`),
          );
        }
        reserved = address;
      }
      let releaseQuota: (() => void) | undefined;
      const authenticated = credentials
        ? this.services.authenticator.authenticate(headers, SOCKET_ROUTE).then(async (principal) => {
            releaseQuota = await this.admission.admit(principal, address);
            return principal;
          })
        : Promise.resolve(undefined);
      authenticated
        .then((principal) => {
          if (aborted) return (release(), releaseQuota?.());
          const data: SocketData = {
            format,
            principal,
            address,
            releaseQuota,
            expiresAt: bearerExpiry(headers.authorization),
            batchedPositions: positions === 'batched',
            batchedEvents: events === 'batched',
            unauthenticatedAddress: reserved,
          };
          res.cork(() => res.upgrade<SocketData>(data, key, protocol, extensions, context));
          reserved = undefined; // the socket holds the slot now, until it authenticates or closes
        })
        .catch((error) => {
          release();
          releaseQuota?.();
          refuse(error);
        });
    } catch (error) {
      release();
      refuse(error);
    }
  }
}
