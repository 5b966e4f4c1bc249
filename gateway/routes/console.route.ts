import { createHash } from 'node:crypto';
import { extname } from 'node:path';
import { z } from 'zod';
import { NotFoundError, UnavailableError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { defineRoute, type Reply } from '../http/route.js';

/**
 * Everything the page may load comes from this origin: its own script and stylesheet, the floorplans it
 * fetches with the token and shows as blob: URLs, and the API and WebSocket on the same host. No inline
 * script or style, no frames, no plugins.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

interface Asset {
  body: Buffer;
  contentType: string;
  etag: string;
}

const SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

/**
 * The control-room console at /console (console/, bundled by esbuild). The page itself is public: it is the
 * sign-in page, and every API call it makes carries the operator's token. At boot the build in console/dist
 * is loaded, or made when it is missing or older than the sources, then served from memory: index.html
 * revalidated on every load, the content-hashed assets cached for good.
 */
export function consoleRoutes(logger: Logger) {
  let assets: Promise<Map<string, Asset>> | undefined;
  const load = () =>
    (assets ??= (async () => {
      const started = performance.now();
      // Loaded lazily: a deployment without the console's folder still boots (and answers 503 here).
      const { ensureConsoleBuilt } = await import('../../console/build.js');
      const build = await ensureConsoleBuilt();
      if (build.built) logger.info({ ms: Math.round(performance.now() - started), files: build.files.length }, 'console built');
      return new Map(
        build.files.map((file) => [
          file.path,
          {
            body: file.body,
            contentType: CONTENT_TYPES[extname(file.path)] ?? 'application/octet-stream',
            etag: `"${createHash('sha256').update(file.body).digest('base64url').slice(0, 27)}"`,
          },
        ]),
      );
    })());
  // Started at boot so the first visitor does not wait; a failure is logged and retried on the next request.
  load().catch((error: unknown) => {
    logger.warn({ err: error }, 'console unavailable: /console answers 503 until it is built (npm run build)');
    assets = undefined;
  });

  const serve = async (path: string, ifNoneMatch: string | undefined, cacheControl: string): Promise<Reply> => {
    let files: Map<string, Asset>;
    try {
      files = await load();
    } catch (error) {
      assets = undefined;
      throw new UnavailableError(`The console is not built: run npm run build (${error instanceof Error ? error.message : String(error)})`);
    }
    const asset = files.get(path);
    if (!asset) throw new NotFoundError('Console file');
    const headers = { ...SECURITY_HEADERS, 'cache-control': cacheControl, etag: asset.etag };
    if (ifNoneMatch?.split(',').some((tag) => tag.trim().replace(/^W\//, '') === asset.etag))
      return { status: 304, headers, representationLength: asset.body.length };
    return { raw: asset.body, contentType: asset.contentType, headers };
  };

  return [
    defineRoute({
      method: 'GET',
      path: '/console',
      summary: 'The control-room console: sign-in page, live floor map and alarm inbox (HTML; its API calls are authenticated)',
      tags: ['console'],
      auth: 'public',
      successStatus: 200,
      rawResponseDoc: { contentType: 'text/html', description: 'The console page' },
      otherResponses: { 304: { description: 'Not modified (If-None-Match matched the ETag)' } },
      handler: ({ headers }) => serve('index.html', headers['if-none-match'], 'no-cache'),
    }),
    defineRoute({
      method: 'GET',
      path: '/console/assets/:file',
      summary: "The console's scripts and stylesheets (content-hashed names, cached for a year)",
      tags: ['console'],
      auth: 'public',
      params: z.object({ file: z.string() }),
      successStatus: 200,
      rawResponseDoc: {
        contentType: [...new Set(Object.values(CONTENT_TYPES).map((type) => type.split(';')[0]!))],
        description: 'A script, stylesheet, source map or image',
      },
      otherResponses: { 304: { description: 'Not modified (If-None-Match matched the ETag)' } },
      handler: ({ params, headers }) => serve(`assets/${params.file}`, headers['if-none-match'], 'public, max-age=31536000, immutable'),
    }),
  ];
}
