import { defineRoute, type RouteDefinition } from '../http/route.js';
import { buildOpenApiDocument } from '../http/openapi.js';

/** The OpenAPI document is public documentation: it holds no organization's data. */
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
  ];
}
