import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../http/route.js';
import { buildOpenApiDocument } from '../http/openapi.js';
import { buildAsyncApiDocument } from '../ws/frames.schema.js';

/** A self-contained page (no external assets) that lists every operation and can send it with a token. */
const docsPage = readFileSync(new URL('../static/api-docs.html', import.meta.url));
/** Its script, a file of its own so the page's policy allows no inline script. */
const docsScript = readFileSync(new URL('../static/api-docs.js', import.meta.url));
/**
 * The page handles a pasted token: no inline script, no framing (clickjacking), nothing loaded from elsewhere.
 */
const DOCS_HEADERS = {
  'cache-control': 'no-cache',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
};

/** The top level of a machine-readable document; its inside is described by its own specification. */
const documentSchema = (version: 'openapi' | 'asyncapi') =>
  z.object({
    [version]: z.string(),
    info: z.object({ title: z.string(), version: z.string(), description: z.string() }),
    ...(version === 'openapi'
      ? { paths: z.record(z.string(), z.unknown()) }
      : { defaultContentType: z.string(), channels: z.record(z.string(), z.unknown()), operations: z.record(z.string(), z.unknown()) }),
    components: z.record(z.string(), z.unknown()),
  });

/** The OpenAPI and AsyncAPI documents and the docs page are public documentation: they hold no organization's data. */
export function openApiRoutes(allRoutes: () => RouteDefinition[]) {
  let document: string | undefined;
  let asyncApi: string | undefined;
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/openapi.json',
      summary: 'This OpenAPI 3.1 document',
      tags: ['operations'],
      auth: 'public',
      response: documentSchema('openapi'),
      handler: () => {
        document ??= JSON.stringify(buildOpenApiDocument(allRoutes()));
        return { raw: document, contentType: 'application/json; charset=utf-8' };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/asyncapi.json',
      summary: 'The AsyncAPI 3.0 document of the WebSocket protocol at /api/v1/ws: every client and server frame as JSON Schema',
      tags: ['operations'],
      auth: 'public',
      response: documentSchema('asyncapi'),
      handler: () => {
        asyncApi ??= JSON.stringify(buildAsyncApiDocument());
        return { raw: asyncApi, contentType: 'application/json; charset=utf-8' };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/docs',
      summary: 'Interactive documentation of this API',
      tags: ['operations'],
      auth: 'public',
      rawResponseDoc: { contentType: 'text/html', description: 'The documentation page (HTML)' },
      handler: () => ({ raw: docsPage, contentType: 'text/html; charset=utf-8', headers: DOCS_HEADERS }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/docs.js',
      summary: 'The script of the documentation page',
      tags: ['operations'],
      auth: 'public',
      rawResponseDoc: { contentType: 'text/javascript', description: 'The documentation page’s script' },
      handler: () => ({ raw: docsScript, contentType: 'text/javascript; charset=utf-8', headers: DOCS_HEADERS }),
    }),
  ];
}
