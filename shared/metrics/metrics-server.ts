import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError, ErrorCode, toErrorBody } from '../errors.js';
import type { Logger } from '../logger.js';
import { StartError } from '../process-guard.js';
import { collectProcessMetrics, registry } from './metrics.js';

export interface MetricsListenerOptions {
  host: string;
  /** METRICS_PORT: 0 is off (no listener), `auto` a free port chosen by the system (tests). */
  port: number | 'auto';
  /** METRICS_TOKEN: when set, a scrape must send `Authorization: Bearer <token>`. */
  token?: string;
  logger: Logger;
  /** The setting the port came from, named in a start error (METRICS_PORT, WORKER_METRICS_PORT). */
  variable?: string;
}

export interface MetricsListener {
  /** The port actually bound. */
  port: number;
  close(): Promise<void>;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * `GET /metrics` on its own plain node:http listener, apart from the uWS gateway: by default on loopback only,
 * so it is never public by accident, and not on the API port where REUSE_PORT=true would hand a scrape to any of
 * several processes. Undefined when METRICS_PORT is 0.
 */
export async function startMetricsListener(options: MetricsListenerOptions): Promise<MetricsListener | undefined> {
  if (options.port === 0) return undefined;
  collectProcessMetrics();
  // Compared as digests: same length whatever was sent, so the comparison leaks nothing about the token.
  const expected = options.token === undefined ? undefined : digest(`Bearer ${options.token}`);
  const server: Server = createServer((req, res) => {
    // The product's flat error body, as on the API.
    const json = (code: ErrorCode, message: string) => {
      const body = toErrorBody(new AppError(code, message));
      res.writeHead(body.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') return json(ErrorCode.NotFound, 'Only /metrics is served here');
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(ErrorCode.MethodNotAllowed, 'Use GET');
    if (expected && !timingSafeEqual(digest(req.headers.authorization ?? ''), expected)) {
      res.setHeader('www-authenticate', 'Bearer');
      return json(ErrorCode.Unauthenticated, 'A valid `Authorization: Bearer <METRICS_TOKEN>` is required');
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => {
        options.logger.error({ err: error }, 'metrics collection failed');
        json(ErrorCode.Internal, 'Metrics collection failed');
      },
    );
  });
  // A scrape is one short request; nothing may keep the process alive at shutdown.
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    const variable = options.variable ?? 'METRICS_PORT';
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new StartError(
          error.code === 'EADDRINUSE'
            ? `${variable}: ${options.host}:${options.port} is in use (another Floorcast may be running on this host): stop it, or set ${variable} to another port`
            : `${variable}: cannot listen on ${options.host}:${options.port} (${error.message})`,
          { cause: error },
        ),
      ),
    );
    server.listen(options.port === 'auto' ? 0 : options.port, options.host, () => {
      server.removeAllListeners('error');
      server.on('error', (error) => options.logger.error({ err: error }, 'metrics listener failed'));
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  options.logger.info({ host: options.host, port, tokenRequired: expected !== undefined }, 'metrics listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
