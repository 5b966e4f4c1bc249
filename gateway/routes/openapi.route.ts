import { readFileSync } from 'node:fs';
import { defineRoute, type RouteDefinition } from '../http/route.js';
import { buildOpenApiDocument } from '../http/openapi.js';

/** A self-contained page (no external assets) that lists every operation and can send it with a token. */
const docsPage = readFileSync(new URL('../static/api-docs.html', import.meta.url));

/** The OpenAPI document and its docs page are public documentation: they hold no organization's data. */
export function openApiRoutes(allRoutes: () => RouteDefinition[]) {
  let document: string | undefined;
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/openapi.json',
      summary: 'This OpenAPI document',
      tags: ['operations'],
      auth: 'public',
      handler: () => {
        document ??= JSON.stringify(buildOpenApiDocument(allRoutes()));
        return { raw: document, contentType: 'application/json; charset=utf-8' };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/docs',
      summary: 'Interactive documentation of this API',
      tags: ['operations'],
      auth: 'public',
      handler: () => ({ raw: docsPage, contentType: 'text/html; charset=utf-8', headers: { 'cache-control': 'no-cache', 'content-security-policy': "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'" } }),
    }),
  ];
}
