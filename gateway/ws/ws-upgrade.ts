import type { HttpRequest, HttpResponse, us_socket_context_t } from 'uWebSockets.js';
import { AppError, BadRequestError, toErrorBody, RateLimitedError, UnavailableError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { RequestAuthenticator } from '../auth/authenticator.js';
import { statusLine } from '../http/status-text.js';
import { bearerExpiry } from './credential-check.js';
import { SOCKET_ROUTE, type SocketAdmission } from './socket-admission.js';
import type { SocketData, SocketLike, WsOptions } from './ws-connection.js';
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
    /** Any other open socket, to upgrade inside its cork (see upgradeLater). */
    private readonly corker: () => Corkable | undefined = () => undefined,
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
          upgradeLater(() => res.upgrade<SocketData>(data, key, protocol, extensions, context), this.corker);
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

/** What can cork: another open socket. */
export type Corkable = Pick<SocketLike, 'cork'>;

/**
 * Upgrades a response after its authentication, outside uWS's own callbacks. Never inside the response's own
 * `res.cork()`: in our uWS (20.30), after the handler `HttpResponse::cork` still reads the HTTP state of `this`,
 * and an upgrade that reallocated the socket in place has put the WebSocket's memory there. When the bytes read
 * happen to say "connection: close, response done", uWS shuts the fresh socket down: the client gets the 101 and
 * its first frame, then a FIN without a close frame (1006). That dropped about one socket in twenty under load.
 * Inside another socket's cork the upgrade writes straight to its own socket and nothing reads HTTP state after;
 * with no other socket open it runs uncorked (uWS prints a warning; a few more syscalls, nothing lost).
 */
function upgradeLater(upgrade: () => void, corker: () => Corkable | undefined): void {
  const other = corker();
  if (other) other.cork(upgrade);
  else upgrade();
}
