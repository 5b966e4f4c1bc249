import fc from 'fast-check';
import { blobOf, encodeForm, gifBytes, pngBytes } from '../../../testkit/images.js';
import { hostileUrlText, hostileValue, unknownKey } from './hostile-values.js';
import { RawJson, SeededRef, validValue, type JsonSchema, type SeededKind } from './schema-arbitrary.js';
import type { SeededWorld } from './seeded-world.js';
import { clip } from './fuzz-settings.js';
import { NO_NUL_PATTERN } from '../../../gateway/http/openapi.js';

/** One operation of the served OpenAPI document. */
export interface Operation {
  /** `METHOD /path`, as printed and as FUZZ_ONLY matches it. */
  key: string;
  method: string;
  path: string;
  pathParams: { name: string; kind: SeededKind | undefined }[];
  queryParams: { name: string; required: boolean; schema: JsonSchema }[];
  /** The JSON body's schema, or 'multipart' for uploads; undefined when the operation takes no body. */
  body: JsonSchema | 'multipart' | undefined;
}

/** The resource a path parameter names, from the segment before it (`/floors/{id}` → floor). */
const RESOURCE_OF_SEGMENT: Record<string, SeededKind> = {
  users: 'user',
  groups: 'group',
  devices: 'device',
  buildings: 'building',
  building: 'building',
  export: 'building',
  floors: 'floor',
  poi_categories: 'poiCategory',
  pois: 'poi',
  events: 'event',
  geofences: 'geofence',
  areas: 'geofence',
  infrastructure: 'infrastructure',
  alarms: 'alarm',
  images: 'image',
  apikeys: 'apikey',
};

/**
 * Shapes the document cannot state (`poses` items are validated one by one, after the envelope; a path graph is
 * only valid when its links join its nodes): described here so valid-looking requests get that far.
 */
const POSE_SCHEMA: JsonSchema = {
  type: 'object',
  required: ['device_id', 'timestamp'],
  properties: {
    device_id: { type: 'string', minLength: 1, maxLength: 20 },
    timestamp: { type: 'integer', minimum: 1_700_000_000_000, maximum: 1_700_000_000_000 },
    building_id: { type: 'integer', minimum: 1 },
    floor_id: { type: 'integer', minimum: 1 },
    x: { type: 'number', minimum: 0, maximum: 100 },
    y: { type: 'number', minimum: 0, maximum: 100 },
    yaw: { type: 'number', minimum: -3, maximum: 3 },
    accuracy: { type: 'number', minimum: 0, maximum: 20 },
    danger: { type: 'boolean' },
  },
};
/** Upload poses carry a recent timestamp, set when sent, so they pass the age checks (the schema above keeps a placeholder). */
const freshTimestamp = () => Date.now() - 60_000;

const bodyHints: Record<string, fc.Arbitrary<unknown>> = {
  'POST /api/v1/realtime/positions': fc.record({ poses: fc.array(validValue(POSE_SCHEMA), { minLength: 1, maxLength: 4 }) }),
  'PUT /api/v1/buildings/{building_id}/paths': fc.integer({ min: 0, max: 4 }).chain((count) =>
    fc.record({
      nodes: fc.constant(
        Array.from({ length: count }, (_, index) => ({ id: index + 1, floor_id: new SeededRef('floor'), x: index, y: index })),
      ),
      links: fc.array(
        fc.record({ source: fc.integer({ min: 1, max: Math.max(count, 1) }), target: fc.integer({ min: 1, max: Math.max(count, 1) }) }),
        { maxLength: count },
      ),
    }),
  ),
};

export function operationsOf(document: any): Operation[] {
  const operations: Operation[] = [];
  for (const [path, methods] of Object.entries<any>(document.paths)) {
    for (const [method, operation] of Object.entries<any>(methods)) {
      // HEAD answers as GET does, without a body (errors included): test/contract/openapi-exact.contract.test.ts checks it.
      if (method === 'head') continue;
      const segments = path.split('/');
      const pathParams = (operation.parameters ?? [])
        .filter((parameter: any) => parameter.in === 'path')
        .map((parameter: any) => {
          const segment = segments[segments.indexOf(`{${parameter.name}}`) - 1] ?? '';
          const kind = parameter.name === 'building_id' ? 'building' : RESOURCE_OF_SEGMENT[segment];
          return { name: parameter.name as string, kind };
        });
      const queryParams = (operation.parameters ?? [])
        .filter((parameter: any) => parameter.in === 'query')
        .map((parameter: any) => ({
          name: parameter.name as string,
          required: Boolean(parameter.required),
          schema: parameter.schema as JsonSchema,
        }));
      const content = operation.requestBody?.content ?? {};
      const body = content['application/json']
        ? (content['application/json'].schema as JsonSchema)
        : content['multipart/form-data']
          ? 'multipart'
          : undefined;
      operations.push({ key: `${method.toUpperCase()} ${path}`, method: method.toUpperCase(), path, pathParams, queryParams, body });
    }
  }
  return operations;
}

export type AuthMode = 'admin' | 'none' | 'bad-bearer' | 'bad-basic' | 'bad-apikey' | 'apikey-without-email';

/** A JSON body to break in one place; `at` picks the spot among the value's containers and keys. */
export type BodyMutation =
  | { kind: 'none' }
  | { kind: 'replace'; at: number; value: unknown }
  | { kind: 'delete'; at: number }
  | { kind: 'add'; at: number; key: string; value: unknown }
  | { kind: 'whole'; value: unknown };

/** How the body travels: as JSON, or broken on the wire. */
export type BodyTransport =
  | { kind: 'json'; contentType: string | undefined }
  | { kind: 'truncated'; keep: number }
  | { kind: 'text'; text: string; contentType: string | undefined }
  | { kind: 'bytes'; bytes: Uint8Array; contentType: string | undefined }
  | { kind: 'empty' }
  | { kind: 'oversize' };

export type MultipartCase =
  | 'png'
  | 'gif'
  | 'garbage-file'
  | 'no-file-part'
  | 'wrong-boundary'
  | 'truncated'
  | 'not-multipart'
  | 'huge-header'
  | 'empty';

/** A request before the seeded ids are filled in: what fast-check generates, shrinks and prints. */
export interface SymbolicRequest {
  auth: AuthMode;
  /** Per path parameter: a seeded row, or text already percent-encoded. */
  path: (SeededRef | string)[];
  /** Query entries in order; a name may repeat, or take the `name[]` form. */
  query: { name: string; value: SeededRef | string; brackets: boolean }[];
  body?: { value: unknown; mutation: BodyMutation; transport: BodyTransport };
  multipart?: MultipartCase;
}

const authMode: fc.Arbitrary<AuthMode> = fc.oneof(
  { weight: 16, arbitrary: fc.constant<AuthMode>('admin') },
  { weight: 1, arbitrary: fc.constantFrom<AuthMode>('none', 'bad-bearer', 'bad-basic', 'bad-apikey', 'apikey-without-email') },
);

const ref = (kind: SeededKind | undefined) => fc.constant(new SeededRef(kind ?? 'building'));

function pathValue(kind: SeededKind | undefined, destructive: boolean): fc.Arbitrary<SeededRef | string> {
  return fc.oneof(
    // A DELETE never targets the seeded rows: every other request needs them.
    { weight: destructive ? 0 : 3, arbitrary: ref(kind) },
    { weight: 3, arbitrary: hostileUrlText },
    { weight: 1, arbitrary: fc.oneof(fc.uuid(), fc.integer({ min: 1, max: 2 ** 31 }).map(String)) },
  );
}

/** A query value as URL text: a valid one for the parameter's schema, or a hostile one. */
function queryValue(name: string, schema: JsonSchema): fc.Arbitrary<SeededRef | string> {
  const valid = validValue(schema, name).map((value) => {
    const first = Array.isArray(value) ? value[0] : value;
    if (first instanceof SeededRef) return first;
    return encodeURIComponent(String(first ?? '').replace(/[\ud800-\udfff]/g, ''));
  });
  return fc.oneof({ weight: 3, arbitrary: valid }, { weight: 2, arbitrary: hostileUrlText });
}

function queryEntries(operation: Operation): fc.Arbitrary<SymbolicRequest['query']> {
  const perParam = operation.queryParams.map((parameter) =>
    fc.oneof(
      { weight: parameter.required ? 1 : 3, arbitrary: fc.constant([]) },
      {
        weight: 4,
        arbitrary: fc.array(
          fc.record({ name: fc.constant(parameter.name), value: queryValue(parameter.name, parameter.schema), brackets: fc.boolean() }),
          { minLength: 1, maxLength: 2 },
        ),
      },
    ),
  );
  const unknown = fc.array(
    fc.record({ name: fc.constantFrom('unknown', '__proto__', '', 'x'.repeat(300), '%00'), value: hostileUrlText, brackets: fc.boolean() }),
    { maxLength: 1 },
  );
  return fc.tuple(fc.tuple(...perParam), unknown).map(([known, extra]) => [...known.flat(), ...extra]);
}

const contentTypes = fc.constantFrom(
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'application/xml',
  'application/json; charset=utf-16',
  '*/*',
  ';;;',
);

const bodyMutation: fc.Arbitrary<BodyMutation> = fc.oneof(
  { weight: 2, arbitrary: fc.constant<BodyMutation>({ kind: 'none' }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), value: hostileValue }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('add' as const), at: fc.nat(), key: unknownKey, value: hostileValue }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('whole' as const), value: hostileValue }) },
);

const bodyTransport: fc.Arbitrary<BodyTransport> = fc.oneof(
  { weight: 60, arbitrary: fc.constant<BodyTransport>({ kind: 'json', contentType: 'application/json' }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('json' as const), contentType: fc.option(contentTypes, { nil: undefined }) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('truncated' as const), keep: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('text' as const),
      text: fc.constantFrom(
        '{',
        '}',
        '{"a":',
        'nul',
        '[1,]',
        "{'a':1}",
        '\u0000',
        '\ufeff{}',
        '{"a":1}{"b":2}',
        'NaN',
        '{"__proto__":{"admin":true}}',
        '',
      ),
      contentType: fc.constant('application/json'),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('bytes' as const),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }),
      contentType: fc.option(contentTypes, { nil: 'application/json' }),
    }),
  },
  { weight: 5, arbitrary: fc.constant<BodyTransport>({ kind: 'empty' }) },
  { weight: 1, arbitrary: fc.constant<BodyTransport>({ kind: 'oversize' }) },
);

export function requestArbitrary(operation: Operation): fc.Arbitrary<SymbolicRequest> {
  const destructive = operation.method === 'DELETE';
  const path = fc.tuple(...operation.pathParams.map((parameter) => pathValue(parameter.kind, destructive)));
  let body: fc.Arbitrary<SymbolicRequest['body'] | undefined> = fc.constant(undefined);
  if (operation.body && operation.body !== 'multipart') {
    const valid = bodyHints[operation.key] ?? validValue(operation.body);
    body = fc.record({ value: valid, mutation: bodyMutation, transport: bodyTransport });
  } else if (operation.method !== 'GET' && operation.method !== 'DELETE') {
    // A body the operation does not take: it must still be refused or ignored cleanly.
    body = fc.option(fc.record({ value: hostileValue, mutation: fc.constant<BodyMutation>({ kind: 'none' }), transport: bodyTransport }), {
      nil: undefined,
      freq: 3,
    });
  }
  const multipart =
    operation.body === 'multipart'
      ? fc.constantFrom<MultipartCase>(
          'png',
          'gif',
          'garbage-file',
          'no-file-part',
          'wrong-boundary',
          'truncated',
          'not-multipart',
          'huge-header',
          'empty',
        )
      : fc.constant(undefined);
  return fc.record({ auth: authMode, path, query: queryEntries(operation), body, multipart }, { requiredKeys: ['auth', 'path', 'query'] });
}

/** The value with NUL appended to its `at`-th string (counting depth first), seeded ids left alone. */
function withNul(value: unknown, at: number): unknown {
  const strings = spots(value).filter((path) => typeof pathValue_(value, path) === 'string');
  if (strings.length === 0) return value;
  const path = strings[at % strings.length]!;
  const copy = structuredCopy(value);
  if (path.length === 0) return `${copy as string}\u0000`;
  const parent = pathValue_(copy, path.slice(0, -1));
  parent[path[path.length - 1]!] = `${parent[path[path.length - 1]!]}\u0000`;
  return copy;
}
const pathValue_ = (value: unknown, path: (string | number)[]): any => path.reduce<any>((node, key) => node?.[key], value);

/**
 * Free text: a string without enum, format or pattern (but the one saying NUL is refused: the server must still
 * refuse it), or a list of such strings.
 */
const freeText = (schema: JsonSchema): boolean =>
  (schema.type === 'string' && !schema.enum && !schema.format && (!schema.pattern || schema.pattern === NO_NUL_PATTERN)) ||
  (schema.type === 'array' && freeText(schema.items ?? {})) ||
  (schema.anyOf ?? []).some(freeText);

/**
 * NUL in one string of the request, a query parameter's or the body's, everything else valid: PostgreSQL refuses
 * NUL in text, so each must be refused before it gets there. Random mutations reach a given field only now and then.
 */
export function nulEverywhere(operation: Operation): fc.Arbitrary<SymbolicRequest> {
  const path = fc.tuple(
    ...operation.pathParams.map((parameter) => (operation.method === 'DELETE' ? fc.constant('a%00b') : ref(parameter.kind))),
  );
  const texts = operation.queryParams.filter((parameter) => freeText(parameter.schema));
  const bodySchema = operation.body && operation.body !== 'multipart' ? operation.body : undefined;
  const valid: fc.Arbitrary<unknown> = bodySchema ? (bodyHints[operation.key] ?? validValue(bodySchema)) : fc.constant(undefined);
  // Each run puts NUL in one place: a free-text query parameter, or one string of the body.
  return fc.tuple(path, valid, fc.nat(), fc.boolean()).map(([pathValues, value, at, inQuery]): SymbolicRequest => {
    const queryHit = texts.length > 0 && (inQuery || !bodySchema);
    return {
      auth: 'admin',
      path: pathValues,
      query: queryHit ? [{ name: texts[at % texts.length]!.name, value: 'a%00b', brackets: false }] : [],
      body: bodySchema
        ? {
            value: queryHit ? value : withNul(value, at),
            mutation: { kind: 'none' },
            transport: { kind: 'json', contentType: 'application/json' },
          }
        : undefined,
    };
  });
}

/** Every container and key of a JSON value, as paths, in a stable order (so `at` shrinks sensibly). */
function spots(value: unknown, path: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(path);
  if (value instanceof SeededRef || value instanceof RawJson || value === null || typeof value !== 'object') return out;
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) spots(item, [...path, index], out);
  } else for (const key of Object.keys(value)) spots((value as Record<string, unknown>)[key], [...path, key], out);
  return out;
}

function setOwn(target: any, key: string | number, value: unknown): void {
  // defineProperty, not assignment: `__proto__` must become a key of the JSON, not the object's prototype.
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A deep copy of the valid value with the mutation applied (the generated value itself is never changed). */
export function mutate(value: unknown, mutation: BodyMutation): unknown {
  if (mutation.kind === 'none') return value;
  if (mutation.kind === 'whole') return mutation.value;
  const copy = structuredCopy(value);
  const all = spots(copy);
  const candidates =
    mutation.kind === 'replace'
      ? all.filter((path) => path.length > 0)
      : mutation.kind === 'delete'
        ? all.filter((path) => path.length > 0 && typeof path[path.length - 1] === 'string')
        : all.filter((path) => {
            const target = at(copy, path);
            return (
              target !== null &&
              typeof target === 'object' &&
              !Array.isArray(target) &&
              !(target instanceof SeededRef) &&
              !(target instanceof RawJson)
            );
          });
  if (candidates.length === 0) return mutation.kind === 'replace' ? (mutation as { value: unknown }).value : copy;
  const path = candidates[mutation.at % candidates.length]!;
  if (mutation.kind === 'add') {
    setOwn(at(copy, path), mutation.key, mutation.value);
    return copy;
  }
  const parent = at(copy, path.slice(0, -1)) as any;
  const last = path[path.length - 1]!;
  if (mutation.kind === 'delete') delete parent[last];
  else setOwn(parent, last, mutation.value);
  return copy;
}

const at = (value: unknown, path: (string | number)[]): any => path.reduce<any>((node, key) => node?.[key], value);

function structuredCopy(value: unknown): unknown {
  if (value instanceof SeededRef || value instanceof RawJson || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(structuredCopy);
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) setOwn(copy, key, structuredCopy((value as Record<string, unknown>)[key]));
  return copy;
}

/** JSON text of a value, with seeded ids filled in and RawJson spliced in verbatim. */
export function serialize(value: unknown, world: SeededWorld): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, function (this: any, key: string, replaced: unknown) {
    const original = this[key];
    if (original instanceof RawJson) {
      raws.push(original.text);
      return `\u0001raw${raws.length - 1}\u0001`;
    }
    if (original instanceof SeededRef)
      return /^\d+$/.test(world.ids[original.kind]) ? Number(world.ids[original.kind]) : world.ids[original.kind];
    if (typeof original === 'number' && key === 'timestamp' && original === 1_700_000_000_000) return freshTimestamp();
    return replaced;
  });
  return (text ?? 'null').replace(/"\\u0001raw(\d+)\\u0001"/g, (_, index: string) => raws[Number(index)]!);
}

/** The request as sent. */
export interface ConcreteRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

/** Path and query stay under this, leaving room for the headers (a bearer token) in a 4 KiB request head. */
const MAX_URL_BYTES = 3_000;

const resolve = (value: SeededRef | string, world: SeededWorld) =>
  value instanceof SeededRef ? encodeURIComponent(world.ids[value.kind]) : value;

export async function concrete(
  operation: Operation,
  request: SymbolicRequest,
  world: SeededWorld,
  baseUrl: string,
  maxBodyBytes: number,
): Promise<ConcreteRequest> {
  let path = operation.path;
  operation.pathParams.forEach((parameter, index) => {
    path = path.replace(`{${parameter.name}}`, resolve(request.path[index]!, world));
  });
  const entries = request.query.map(({ name, value, brackets }) => `${brackets ? `${name}[]` : name}=${resolve(value, world)}`);
  // The pinned uWebSockets.js build drops, with no answer, a request whose line and headers pass 4 KiB and arrive in
  // more than one read (docs/access.md, test/integration/request-order.test.ts): on loopback that happens now and
  // then, so the last entries are left out until the path and query fit with the headers in that.
  while (entries.length > 0 && path.length + entries.join('&').length > MAX_URL_BYTES) entries.pop();
  const query = entries.join('&');
  const headers: Record<string, string> = {};
  switch (request.auth) {
    case 'admin':
      headers.authorization = `Bearer ${world.adminToken}`;
      break;
    case 'bad-bearer':
      headers.authorization = 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.';
      break;
    case 'bad-basic':
      headers.authorization = `Basic ${Buffer.from('nobody@example.test:\u00e9').toString('base64')}`;
      break;
    case 'bad-apikey':
      headers['x-api-key'] = `fc_${'x'.repeat(40)}`;
      headers['x-api-email'] = 'admin@example.test';
      break;
    case 'apikey-without-email':
      headers['x-api-key'] = 'not-a-key';
      break;
  }
  let body: string | Buffer | undefined;
  if (request.body) {
    const { transport } = request.body;
    const json = () => serialize(mutate(request.body!.value, request.body!.mutation), world);
    switch (transport.kind) {
      case 'json':
        body = json();
        if (transport.contentType) headers['content-type'] = transport.contentType;
        break;
      case 'truncated': {
        const text = json();
        body = text.slice(0, transport.keep % Math.max(text.length, 1));
        headers['content-type'] = 'application/json';
        break;
      }
      case 'text':
        body = transport.text;
        if (transport.contentType) headers['content-type'] = transport.contentType;
        break;
      case 'bytes':
        body = Buffer.from(transport.bytes);
        if (transport.contentType) headers['content-type'] = transport.contentType;
        break;
      case 'empty':
        body = '';
        headers['content-type'] = 'application/json';
        break;
      case 'oversize':
        body = `{"a":"${'x'.repeat(maxBodyBytes + 10)}"}`;
        headers['content-type'] = 'application/json';
        break;
    }
  }
  if (request.multipart) Object.assign(headers, await multipartBody(request.multipart, (encoded) => (body = encoded)));
  return { method: operation.method, url: `${baseUrl}${path}${query ? `?${query}` : ''}`, headers, body };
}

/** A few upload bodies: two real images, and garbage around and inside the multipart framing. */
async function multipartBody(kind: MultipartCase, set: (body: Buffer) => void): Promise<Record<string, string>> {
  const form = new FormData();
  if (kind === 'png') form.append('image', blobOf(pngBytes(2, 2), 'image/png'), 'a.png');
  else if (kind === 'gif') form.append('image', blobOf(gifBytes(), 'image/gif'), 'a.gif');
  else if (kind === 'garbage-file')
    form.append('image', blobOf(Buffer.from('\u0000\u00ff garbage \ud800 not an image'), 'image/png'), '\u0000.png');
  else form.append('rtf', 'no file here');
  const encoded = await encodeForm(form);
  switch (kind) {
    case 'wrong-boundary':
      set(encoded.body);
      return { 'content-type': 'multipart/form-data; boundary=not-the-one' };
    case 'truncated':
      set(encoded.body.subarray(0, Math.floor(encoded.body.length / 2)));
      return { 'content-type': encoded.contentType };
    case 'not-multipart':
      set(Buffer.from('{"image":"x"}'));
      return { 'content-type': 'application/json' };
    case 'huge-header':
      set(
        Buffer.concat([
          Buffer.from(`--b\r\nContent-Disposition: form-data; name="image"; filename="${'x'.repeat(70_000)}"\r\n\r\n`),
          pngBytes(1, 1),
          Buffer.from('\r\n--b--\r\n'),
        ]),
      );
      return { 'content-type': 'multipart/form-data; boundary=b' };
    case 'empty':
      set(Buffer.alloc(0));
      return { 'content-type': 'multipart/form-data; boundary=b' };
    default:
      set(encoded.body);
      return { 'content-type': encoded.contentType };
  }
}

export interface Outcome {
  status: number;
  contentType: string;
  text: string;
}

export async function send(request: ConcreteRequest): Promise<Outcome> {
  const response = await fetch(request.url, {
    method: request.method,
    headers: request.headers,
    body: request.body as BodyInit | undefined,
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, contentType: response.headers.get('content-type') ?? '', text: await response.text() };
}

/** What the gateway owes every request, however malformed: no 5xx, and a flat JSON error body on every 4xx. */
export function violations(outcome: Outcome): string | undefined {
  if (outcome.status >= 500) return `answered ${outcome.status}: ${clip(outcome.text, 400)}`;
  if (outcome.status < 400) return undefined;
  if (!outcome.contentType.includes('application/json'))
    return `a ${outcome.status} whose content-type is "${outcome.contentType}", not JSON: ${clip(outcome.text, 200)}`;
  let body: any;
  try {
    body = JSON.parse(outcome.text);
  } catch {
    return `a ${outcome.status} whose body is not JSON: ${clip(outcome.text, 200)}`;
  }
  if (
    body === null ||
    typeof body !== 'object' ||
    body.status !== outcome.status ||
    typeof body.code !== 'string' ||
    typeof body.message !== 'string'
  ) {
    return `a ${outcome.status} whose body is not {status, code, message} with the same status: ${clip(outcome.text, 300)}`;
  }
  return undefined;
}

export function renderRequest(request: ConcreteRequest): string {
  const body =
    request.body === undefined
      ? ''
      : `\n${clip(typeof request.body === 'string' ? request.body : `<${request.body.length} bytes> ${JSON.stringify(request.body.subarray(0, 120).toString('latin1'))}`)}`;
  const headers = Object.entries(request.headers)
    .map(([name, value]) => `${name}: ${clip(value, 80)}`)
    .join('\n');
  return `${request.method} ${clip(request.url, 400)}\n${headers}${body}`;
}
