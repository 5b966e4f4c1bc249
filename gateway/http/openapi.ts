import { z } from 'zod';
import { packageVersion } from '../../shared/version.js';
import type { RouteDefinition } from './route.js';

const errorBodySchema = {
  type: 'object',
  required: ['status', 'code', 'message'],
  properties: {
    status: { type: 'integer' },
    code: { type: 'string' },
    message: { type: 'string' },
    errors: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' } } } },
  },
};

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const generated = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;
  delete generated.$schema;
  return generated;
}

/** `:id` becomes `{id}`; the document lists each path once, without trailing slash. */
const openApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, '{$1}');

/**
 * The OpenAPI 3.1 document, generated from the same zod schemas that validate requests, so it cannot drift
 * from what the server accepts.
 */
export function buildOpenApiDocument(routes: RouteDefinition[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    if (route.hidden) continue;
    const operation: Record<string, unknown> = {
      summary: route.summary,
      tags: route.tags ?? [],
      security: route.auth === 'public' ? [] : [{ bearer: [] }, { apiKey: [], apiEmail: [] }],
      parameters: [] as unknown[],
      responses: {} as Record<string, unknown>,
    };
    const parameters = operation.parameters as unknown[];
    for (const name of route.path.match(/:([A-Za-z_]+)/g) ?? []) {
      const key = name.slice(1);
      const shape = route.params instanceof z.ZodObject ? (route.params.shape as Record<string, z.ZodType>)[key] : undefined;
      parameters.push({ name: key, in: 'path', required: true, schema: shape ? jsonSchema(shape, 'input') : { type: 'string' } });
    }
    if (route.query instanceof z.ZodObject) {
      for (const [key, shape] of Object.entries(route.query.shape as Record<string, z.ZodType>)) {
        parameters.push({ name: key, in: 'query', required: !shape.safeParse(undefined).success, schema: jsonSchema(shape, 'input'), description: shape.description });
      }
    }
    if (route.body && route.bodyKind !== 'raw') {
      operation.requestBody = { required: true, content: { 'application/json': { schema: jsonSchema(route.body, 'input') } } };
    }
    if (route.rawBodyDoc) operation.requestBody = { required: true, content: { [route.rawBodyDoc.contentType]: { schema: route.rawBodyDoc.schema } } };
    const responses = operation.responses as Record<string, unknown>;
    const success = String(route.successStatus ?? (route.response ? 200 : 204));
    responses[success] = route.response
      ? { description: 'Success', content: { 'application/json': { schema: jsonSchema(route.response, 'output') } } }
      : route.rawResponseDoc
        ? { description: route.rawResponseDoc.description, content: { [route.rawResponseDoc.contentType]: { schema: { type: 'string', format: 'binary' } } } }
        : { description: 'Success, no content' };
    responses.default = { description: 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    (paths[openApiPath(route.path)] ??= {})[route.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Floorcast indoor-location API',
      version: packageVersion,
      description: 'Indoor-location REST API (spec v1 paths) and real-time gateway. Errors are always `{status, code, message, errors?}`.',
    },
    paths,
    components: {
      schemas: { Error: errorBodySchema },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
        basic: { type: 'http', scheme: 'basic' },
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY' },
        apiEmail: { type: 'apiKey', in: 'header', name: 'X-API-EMAIL' },
      },
    },
  };
}
