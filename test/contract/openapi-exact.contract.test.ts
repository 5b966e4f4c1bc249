import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, login } from '../../testkit/identity.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { DocumentValidator } from './schema-validator.js';

/**
 * The document is no looser than the server (issue 29): list parameters state their items as the server checks
 * them, every string a client sends says NUL is refused, a 405 names the methods the path has in `Allow`, and
 * HEAD answers wherever GET does, with GET's status and headers and no body.
 */

type Schema = Record<string, any>;

let running: RunningGateway;
let token: string;
let document: Schema;
let validator: DocumentValidator;
let venue: Awaited<ReturnType<typeof createVenue>>;
let geofenceId: string;

const FROM = new Date(Date.now() - 86_400_000).toISOString();
const TO = new Date(Date.now() + 86_400_000).toISOString();

/** Required parameters, from the seeded venue where a schema cannot tell (ids, report windows). */
function requiredValue(name: string, schema: Schema): string {
  const known: Record<string, string> = {
    building_id: String(venue.building.id),
    floor_id: String(venue.floors[0].id),
    from_date: FROM,
    to_date: TO,
  };
  if (known[name]) return known[name]!;
  if (schema.enum) return String(schema.enum[0]);
  if (schema.format === 'uuid') return randomUUID();
  if (schema.type === 'integer' || schema.type === 'number') return '1';
  return 'sample';
}

const operations = () =>
  Object.entries(document.paths as Record<string, Schema>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, spec]) => ({ path, method, spec: spec as Schema })),
  );

/** A path of the document with its parameters filled: the venue's building, floor and a geofence where named. */
function concrete(path: string): string {
  return path.replace(/\{([a-z_]+)\}/g, (_match, name: string, offset: number) => {
    const collection = path.slice(0, offset - 1);
    if (name === 'building_id' || collection === '/api/v1/buildings') return String(venue.building.id);
    if (collection === '/api/v1/floors') return String(venue.floors[0].id);
    if (collection === '/api/v1/geofences') return geofenceId;
    if (name === 'file') return 'missing.js';
    return randomUUID();
  });
}

/** The query of the required parameters, plus `extra`. */
function queryFor(spec: Schema, extra: [string, string][] = []): string {
  const query = new URLSearchParams();
  for (const parameter of spec.parameters ?? []) {
    if (parameter.in === 'query' && parameter.required && !extra.some(([name]) => name === parameter.name))
      query.set(parameter.name, requiredValue(parameter.name, parameter.schema));
  }
  for (const [name, value] of extra) query.append(name, value);
  const text = query.toString();
  return text ? `?${text}` : '';
}

const get = (url: string, method = 'GET') => fetch(running.baseUrl + url, { method, headers: { authorization: `Bearer ${token}` } });

/** Every string schema under `schema` (what a client sends), with where it is. */
function stringsIn(schema: unknown, where: string, found: { where: string; schema: Schema }[] = []): { where: string; schema: Schema }[] {
  if (Array.isArray(schema)) {
    for (const [index, item] of schema.entries()) stringsIn(item, `${where}/${index}`, found);
  } else if (schema && typeof schema === 'object') {
    const node = schema as Schema;
    const types = ([] as unknown[]).concat(node.type);
    if (types.includes('string')) found.push({ where, schema: node });
    for (const [key, value] of Object.entries(node))
      if (key !== 'enum' && key !== 'const' && key !== 'default' && key !== 'examples') stringsIn(value, `${where}/${key}`, found);
  }
  return found;
}

describe('the OpenAPI document is as strict as the server', () => {
  beforeAll(async () => {
    running = await startTestGateway();
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    const admin = running.client.withToken(token);
    venue = await createVenue(admin, 'Exact venue');
    const fence = await admin.post('/api/v1/geofences', {
      name: 'Exact fence',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      type: 'POLYGON',
      cartesians: squareCartesians(10, 10, 10),
    });
    expect(fence.status, fence.text).toBe(201);
    geofenceId = fence.body.id;
    document = await (await fetch(`${running.baseUrl}/api/v1/openapi.json`)).json();
    validator = new DocumentValidator(document);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('documents every list query parameter as an array of the items the server accepts, and no other', async () => {
    const problems: string[] = [];
    let lists = 0;
    for (const { path, method, spec } of operations()) {
      if (method !== 'get') continue;
      for (const parameter of spec.parameters ?? []) {
        if (parameter.in !== 'query') continue;
        const schema = parameter.schema as Schema;
        const name = `${method.toUpperCase()} ${path} ${parameter.name}`;
        if ((schema.anyOf ?? []).some((option: Schema) => option.type === 'array')) {
          problems.push(`${name}: a list documented as "a string or strings", without its items`);
          continue;
        }
        if (schema.type !== 'array') continue;
        lists += 1;
        const items = schema.items as Schema;
        const url = concrete(path);
        const status = async (values: string[], form: 'commas' | 'repeated' = 'commas') => {
          const pairs: [string, string][] =
            form === 'commas' ? [[parameter.name, values.join(',')]] : values.map((value) => [parameter.name, value]);
          const response = await get(url + queryFor(spec, pairs));
          const body = response.status === 422 ? await response.json() : (await response.arrayBuffer(), undefined);
          return { status: response.status, fields: (body?.errors ?? []).map((error: { field: string }) => error.field).join(' ') };
        };
        const refusedForIt = (answer: { status: number; fields: string }) =>
          answer.status === 422 && answer.fields.includes(`query.${parameter.name}`);
        const valid: string[] = items.enum
          ? items.enum.map(String)
          : items.format === 'uuid'
            ? [randomUUID(), randomUUID()]
            : items.type === 'integer'
              ? ['1', '2']
              : ['free text', 'more-text'];
        for (const value of valid) {
          if (validator.errors(items, items.type === 'integer' ? Number(value) : value).length > 0)
            problems.push(`${name}: test value ${value} breaks the documented item`);
          const answer = await status([value]);
          if (refusedForIt(answer)) problems.push(`${name}: the documented item ${value} is refused`);
        }
        const repeated = await status(valid, 'repeated');
        if (refusedForIt(repeated)) problems.push(`${name}: repeated items (${valid.join(', ')}) are refused`);
        const invalid: string[] = items.enum
          ? ['not-a-member', `${items.enum[0]}x`]
          : items.format === 'uuid'
            ? ['not-a-uuid']
            : items.type === 'integer'
              ? ['abc', '1.5', ...(items.exclusiveMinimum === 0 || items.minimum === 1 ? ['0', '-3'] : [])]
              : [];
        if (items.type === 'string' && !items.enum && !items.format && !items.pattern)
          problems.push(`${name}: free-text items must document that NUL is refused`);
        for (const value of invalid) {
          if (validator.errors(items, items.type === 'integer' ? Number(value) : value).length === 0)
            problems.push(`${name}: test value ${value} is valid by the document`);
          const answer = await status([valid[0]!, value]);
          if (!refusedForIt(answer))
            problems.push(`${name}: an item the document refuses (${value}) answered ${answer.status} ${answer.fields}`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(lists).toBeGreaterThan(20);
  });

  it('documents on every string a client sends that NUL is refused, and a 422 on every operation', async () => {
    const problems: string[] = [];
    for (const { path, method, spec } of operations()) {
      const name = `${method.toUpperCase()} ${path}`;
      // HEAD answers a 422 without its body, as every other.
      if (!spec.responses?.['422'] || (method !== 'head' && !spec.responses['422'].content?.['application/json']))
        problems.push(`${name}: no documented 422`);
      const inputs = [
        ...(spec.parameters ?? []).map((parameter: Schema) => [`${parameter.in} ${parameter.name}`, parameter.schema] as const),
        ...Object.entries((spec.requestBody?.content ?? {}) as Record<string, Schema>)
          .filter(([type]) => type === 'application/json')
          .map(([, content]) => ['body', content.schema] as const),
      ];
      for (const [where, schema] of inputs) {
        for (const string of stringsIn(schema, where)) {
          if (string.schema.enum || 'const' in string.schema || string.schema.format === 'binary') continue;
          // A string the document accepts, with a NUL inside, must be refused by the document too.
          const candidate = string.schema.format === 'uuid' ? randomUUID() : string.schema.format === 'date-time' ? FROM : 'abc';
          if (validator.errors({ ...string.schema, type: 'string' }, candidate).length > 0) continue;
          if (validator.errors({ ...string.schema, type: 'string' }, `${candidate}\u0000`).length === 0)
            problems.push(`${name} ${string.where}: a string with NUL is valid by the document`);
        }
      }
    }
    expect(problems).toEqual([]);
    // And the server does refuse one, where the document says it would.
    const refused = await get(`/api/v1/devices/search?identifiers=${encodeURIComponent('a\u0000b')}`);
    expect(refused.status).toBe(422);
  });

  it('answers 405 with Allow naming the methods the path has (HEAD with GET, OPTIONS everywhere)', async () => {
    const problems: string[] = [];
    // uWebSockets.js itself closes the connection on a method it does not know (PURGE): the five are those that reach a route.
    const candidates = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
    const template = (path: string) => new RegExp(`^${path.replace(/\{[a-z_]+\}/g, '[^/]+')}$`);
    for (const path of Object.keys(document.paths)) {
      const url = concrete(path);
      // `/geofences/search` is also `/geofences/{id}` for the methods the static path lacks: the URL has the methods of both.
      const documented = [
        ...new Set(
          Object.keys(document.paths)
            .filter((other) => template(other).test(url))
            .flatMap((other) => Object.keys(document.paths[other]).map((m) => m.toUpperCase())),
        ),
      ];
      const expected = [...documented, 'OPTIONS'].sort();
      for (const method of candidates.filter((candidate) => !documented.includes(candidate))) {
        const response = await fetch(running.baseUrl + url, { method }).catch((error: Error) => error);
        if (response instanceof Error) {
          problems.push(`${method} ${path}: ${response.message} (${String(response.cause)})`);
          continue;
        }
        const body = await response.json();
        const allow = (response.headers.get('allow') ?? '')
          .split(',')
          .map((m) => m.trim())
          .filter(Boolean)
          .sort();
        if (response.status !== 405 || body.status !== 405) problems.push(`${method} ${path}: ${response.status}, not 405`);
        else if (allow.join() !== expected.join())
          problems.push(`${method} ${path}: Allow "${allow.join(', ')}", expected "${expected.join(', ')}"`);
      }
    }
    expect(problems).toEqual([]);
    expect((await fetch(`${running.baseUrl}/api/v1/no-such-thing`, { method: 'DELETE' })).status).toBe(404);
  });

  it("answers HEAD on every GET path of the document with GET's status and headers, and no body", async () => {
    const problems: string[] = [];
    // Values that differ from one request to the next, whatever the method.
    const volatile = new Set(['date', 'ratelimit', 'x-db-statistics', 'content-length', 'transfer-encoding']);
    let succeeded = 0;
    for (const { path, method, spec } of operations()) {
      if (method !== 'get') continue;
      if (!document.paths[path].head) problems.push(`GET ${path}: no HEAD documented`);
      const url = concrete(path) + queryFor(spec);
      const full = await get(url);
      const body = Buffer.from(await full.arrayBuffer());
      const bytes = body.length;
      // Reports carry their elapsed time (to 0.01 ms): a body that changes between two GETs has no one length to compare.
      const steady = Buffer.from(await (await get(url)).arrayBuffer()).equals(body);
      const head = await get(url, 'HEAD');
      const text = await head.text();
      const name = `HEAD ${path}`;
      if (head.status !== full.status) problems.push(`${name}: ${head.status}, GET ${full.status}`);
      if (text !== '') problems.push(`${name}: a body of ${text.length} characters`);
      const headers = (response: Response) =>
        [...response.headers]
          .filter(([header]) => !volatile.has(header))
          .map(([header, value]) => `${header}: ${value}`)
          .sort();
      expect.soft(headers(head), name).toEqual(headers(full));
      if (head.headers.has('ratelimit') !== full.headers.has('ratelimit')) problems.push(`${name}: RateLimit on one of HEAD and GET only`);
      // A length announced by HEAD is the one of GET's body.
      const announced = head.headers.get('content-length');
      if (announced !== null && steady && Number(announced) !== bytes)
        problems.push(`${name}: Content-Length ${announced}, GET's body has ${bytes} bytes`);
      if (full.ok) succeeded += 1;
    }
    expect(problems).toEqual([]);
    expect(succeeded).toBeGreaterThan(30);
  });
});
