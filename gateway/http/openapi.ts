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
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['field', 'message'],
        properties: { field: { type: 'string' }, message: { type: 'string' } },
        additionalProperties: false,
      },
    },
  },
  additionalProperties: false,
};

/**
 * What every string a client sends must match: the server refuses NUL in any of them with a 422 (pg-text.ts:
 * PostgreSQL cannot store it). An unpaired UTF-16 surrogate is refused too; the 422 response says so.
 */
export const NO_NUL_PATTERN = '^[^\\u0000]*$';

const REFUSED_TEXT =
  'Validation failed (`errors` names each field). Besides each schema, every string sent (path, query, body) is refused ' +
  'when it holds NUL (\\u0000) or an unpaired UTF-16 surrogate: PostgreSQL cannot store either.';

export function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const generated = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;
  delete generated.$schema;
  return io === 'input' ? (refusingNul(generated) as Record<string, unknown>) : generated;
}

/**
 * A request schema with NO_NUL_PATTERN on each free string. Enums, constants and formats (uuid, date-time, email)
 * already exclude NUL, and so do the patterns written here (anchored classes of printable characters).
 */
function refusingNul(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(refusingNul);
  if (!schema || typeof schema !== 'object') return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    copy[key] = key === 'enum' || key === 'const' || key === 'default' ? value : refusingNul(value);
  }
  const free = copy.type === 'string' && !('enum' in copy) && !('const' in copy) && copy.format === undefined && copy.pattern === undefined;
  if (free) copy.pattern = NO_NUL_PATTERN;
  return copy;
}

/** `:id` becomes `{id}`; the document lists each path once, without trailing slash. */
const openApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, '{$1}');

/**
 * The object a query or path schema starts from: a `.transform()` (or `.pipe()`) after the object changes what
 * the handler gets, never what the client sends, so the parameters are those of the object before it.
 */
function inputObject(schema: z.ZodType | undefined): z.ZodObject | undefined {
  let current: unknown = schema;
  while (current instanceof z.ZodPipe) current = current.def.in;
  return current instanceof z.ZodObject ? current : undefined;
}

/** Who may call: none, sign-in credentials (Basic or an API key), or any credential (the e-mail header is optional). */
function securityOf(route: RouteDefinition): Record<string, string[]>[] {
  const apiKey: Record<string, string[]>[] = [{ apiKey: [] }, { apiKey: [], apiEmail: [] }];
  if (route.signIn) return [{ basic: [] }, ...apiKey];
  return route.auth === 'public' ? [] : [{ bearer: [] }, ...apiKey];
}

/** Text media types are strings; anything else (images) is binary. */
const rawSchema = (mediaType: string) =>
  /^(text\/|application\/json)/.test(mediaType) ? { type: 'string' } : { type: 'string', format: 'binary' };

function responsesOf(route: RouteDefinition): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  const success = route.successStatus ?? (route.response || route.rawResponseDoc ? 200 : 204);
  if (route.response)
    responses[success] = { description: 'Success', content: { 'application/json': { schema: jsonSchema(route.response, 'output') } } };
  else if (route.rawResponseDoc) {
    const types = ([] as string[]).concat(route.rawResponseDoc.contentType);
    responses[success] = {
      description: route.rawResponseDoc.description,
      content: Object.fromEntries(types.map((type) => [type, { schema: rawSchema(type) }])),
    };
  } else responses[success] = { description: 'Success, no content' };
  for (const [status, other] of Object.entries(route.otherResponses ?? {})) {
    responses[status] = other.schema
      ? { description: other.description, content: { 'application/json': { schema: jsonSchema(other.schema, 'output') } } }
      : { description: other.description };
  }
  responses[422] ??= { description: REFUSED_TEXT, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  responses.default = { description: 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  return responses;
}

/**
 * A list parameter (`listParam()`): what it accepts is `string | string[]` split at commas, then checked item
 * by item. The document gives the array of checked items (style form, repeated keys: what generated clients
 * send); the description adds the comma form.
 */
function listItems(shape: z.ZodType): z.ZodArray | undefined {
  let current: unknown = shape;
  while (current instanceof z.ZodOptional || current instanceof z.ZodDefault) current = current.def.innerType;
  if (!(current instanceof z.ZodPipe) || !(current.def.out instanceof z.ZodArray)) return undefined;
  const split = current.def.in;
  return split instanceof z.ZodPipe && split.def.in instanceof z.ZodUnion ? current.def.out : undefined;
}

function queryParameter(key: string, shape: z.ZodType): Record<string, unknown> {
  const parameter: Record<string, unknown> = { name: key, in: 'query', required: !shape.safeParse(undefined).success };
  const list = listItems(shape);
  if (list) {
    const note = 'Repeat the parameter (`name=a&name=b`) or separate items with commas (`name=a,b`).';
    const description = shape.description ? `${shape.description}. ${note}` : note;
    Object.assign(parameter, { schema: jsonSchema(list, 'input'), style: 'form', explode: true, description });
  } else {
    parameter.schema = jsonSchema(shape, 'input');
    if (shape.description) parameter.description = shape.description;
  }
  return parameter;
}

function parametersOf(route: RouteDefinition): unknown[] {
  const parameters: unknown[] = [];
  const params = inputObject(route.params)?.shape as Record<string, z.ZodType> | undefined;
  for (const name of route.path.match(/:([A-Za-z_]+)/g) ?? []) {
    const key = name.slice(1);
    const shape = params?.[key];
    const schema = shape ? jsonSchema(shape, 'input') : { type: 'string', pattern: NO_NUL_PATTERN };
    parameters.push({ name: key, in: 'path', required: true, schema });
  }
  const query = inputObject(route.query);
  if (route.query && !query)
    throw new Error(`${route.method} ${route.path}: the query schema must be an object (optionally transformed) to be documented`);
  for (const [key, shape] of Object.entries((query?.shape ?? {}) as Record<string, z.ZodType>)) parameters.push(queryParameter(key, shape));
  return parameters;
}

/** HEAD wherever GET is: GET's answers (status and headers, Content-Length included) without their bodies. */
function headOf(get: Record<string, unknown>): Record<string, unknown> {
  const responses = Object.entries(get.responses as Record<string, { description: string }>).map(([status, response]) => [
    status,
    { description: `${response.description}: as GET answers, without the body` },
  ]);
  return { ...get, summary: `${get.summary as string} (headers only)`, responses: Object.fromEntries(responses) };
}

/**
 * The OpenAPI 3.1 document, generated from the route definitions: the zod schemas that validate requests and
 * describe answers, the success status, the other answers, the raw media types and who may call. Nothing is
 * written by hand here, so nothing can be forgotten.
 */
export function buildOpenApiDocument(routes: RouteDefinition[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    if (route.hidden) continue;
    const operation: Record<string, unknown> = {
      summary: route.summary,
      tags: route.tags ?? [],
      security: securityOf(route),
      parameters: parametersOf(route),
    };
    const body = route.bodyDoc ?? route.body;
    if (route.rawBodyDoc)
      operation.requestBody = { required: true, content: { [route.rawBodyDoc.contentType]: { schema: route.rawBodyDoc.schema } } };
    else if (body && route.bodyKind !== 'raw')
      operation.requestBody = {
        required: !body.safeParse(undefined).success,
        content: { 'application/json': { schema: jsonSchema(body, 'input') } },
      };
    operation.responses = responsesOf(route);
    const item = (paths[openApiPath(route.path)] ??= {});
    item[route.method.toLowerCase()] = operation;
    if (route.method === 'GET') item.head = headOf(operation);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Floorcast indoor-location API',
      version: packageVersion,
      description:
        'Indoor-location REST API (spec v1 paths) and real-time gateway. Errors are always `{status, code, message, errors?}`. ' +
        'The WebSocket protocol at `/api/v1/ws` is described by the AsyncAPI document at `/api/v1/asyncapi.json`.',
    },
    paths,
    components: {
      schemas: { Error: errorBodySchema },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'An access token from POST /api/v1/auth/access_tokens',
        },
        basic: { type: 'http', scheme: 'basic', description: 'email:password; only to get an access token' },
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY', description: 'An API key; on its own, or with X-API-EMAIL' },
        apiEmail: {
          type: 'apiKey',
          in: 'header',
          name: 'X-API-EMAIL',
          description: 'Optional: the e-mail of the key’s owner, checked when sent',
        },
      },
    },
  };
}
