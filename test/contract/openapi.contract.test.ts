import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, squareCartesians } from '../support/cartography.js';
import { basicAuth, type TestClient } from '../support/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, createApiKey, login } from '../support/identity.js';
import { blobOf, encodeForm, pngBytes } from '../support/images.js';
import { startTestGateway, type RunningGateway } from '../support/test-gateway.js';
import { DocumentValidator } from './schema-validator.js';

/**
 * The served OpenAPI document against the server, as an integrator would use it: every operation is called
 * with parameters and bodies built from the document (realistic ids and a few bodies from a seeded venue), and
 * each answer's status, media type and body must be what the document declares for that status. Bodies are
 * checked closed: a field the document does not declare fails.
 */

type Schema = Record<string, any>;
interface Operation {
  method: string;
  path: string;
  spec: Schema;
  /** Optional parameters a variant sends (e.g. `view=compact`): documented alternatives must be exercised too. */
  extraQuery?: Record<string, string>;
}

const METHOD_ORDER = ['post', 'get', 'put', 'patch', 'delete'];
const FROM = '2026-01-01T00:00:00.000+00:00';

let running: RunningGateway;
let admin: TestClient;
let token: string;
/** Reads go with an API key alone (no X-API-EMAIL), as the document says they may; writes with the token. */
let apiKey: string;
let document: Schema;
let validator: DocumentValidator;
let venue: Awaited<ReturnType<typeof createVenue>>;
let adminUserId: string;
/** Ids of objects the pass created, by collection path (`/api/v1/groups` -> the group's id). */
const created = new Map<string, unknown>();

const pad = (n: number) => String(n).padStart(2, '0');
const today = () => {
  const now = new Date();
  return `${now.getUTCFullYear()}-${pad(now.getUTCMonth() + 1)}-${pad(now.getUTCDate())}T00:00:00.000+00:00`;
};

/** A value for a named field or parameter that the seeded venue gives better than any schema could. */
function known(name: string): unknown {
  const floor = venue.floors[0].id;
  const values: Record<string, unknown> = {
    building_id: venue.building.id,
    building_ids: String(venue.building.id),
    floor_id: floor,
    project_id: venue.building.id,
    user_id: adminUserId,
    user_ids: adminUserId,
    device_id: 'contract-device',
    device_ids: 'contract-device',
    date: today(),
    from_date: FROM,
    to_date: new Date(Date.now() + 86_400_000).toISOString(),
    email: `contract-${randomUUID().slice(0, 8)}@example.test`,
    password: 'contract-password-1',
    picture_id: null,
    parent_id: null,
    group_id: null,
    category_id: null,
    geofence_id: created.get('/api/v1/geofences'),
    geofence_ids: created.get('/api/v1/geofences'),
  };
  return values[name];
}

/** A valid-looking value from a JSON Schema: the first alternative, the lowest bound, every declared field. */
function sample(schema: Schema | undefined, name = ''): unknown {
  const override = known(name);
  if (override !== undefined) return override;
  if (!schema) return 'sample';
  if ('const' in schema) return schema.const;
  if (schema.enum) return schema.enum[0];
  if ('default' in schema) return schema.default;
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return sample(alternatives.find((candidate: Schema) => candidate.type !== 'null') ?? alternatives[0], name);
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
  switch (type) {
    case 'object':
      return Object.fromEntries(Object.entries((schema.properties ?? {}) as Record<string, Schema>).map(([key, property]) => [key, sample(property, key)]));
    case 'array':
      if (schema.prefixItems) return schema.prefixItems.map((item: Schema) => sample(item));
      return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () => sample(schema.items, name));
    case 'integer':
    case 'number':
      return Math.max(1, schema.minimum ?? 1, schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
    case 'boolean':
      return false;
    case 'null':
      return null;
    default:
      if (schema.format === 'uuid') return randomUUID();
      if (schema.format === 'date-time') return new Date().toISOString();
      if (schema.format === 'email') return `contract-${randomUUID().slice(0, 8)}@example.test`;
      return `sample-${name || 'text'}`.slice(0, Math.max(schema.maxLength ?? 30, 1)).padEnd(schema.minLength ?? 0, 'x');
  }
}

/** Bodies the schema alone cannot make valid (cross-field rules, geometry), from the seeded venue. */
function exampleBody(operation: Operation): unknown {
  const floor = venue.floors[0].id;
  const building = venue.building.id;
  const examples: Record<string, () => unknown> = {
    'post /api/v1/buildings': () => ({ name: 'Contract building', location: { lat: 40.4, lng: -3.7 }, dimensions: { width: 50, length: 40 }, rotation: 0 }),
    'post /api/v1/floors': () => ({ building_id: building, level: 7, name: 'Contract floor' }),
    'post /api/v1/geofences': () => ({ building_id: building, floor_id: floor, name: 'Contract zone', type: 'POLYGON', cartesians: squareCartesians(10, 10, 10) }),
    'post /api/v1/areas': () => ({ building_id: building, floor_id: floor, name: 'Contract area', type: 'POLYGON', cartesians: squareCartesians(30, 30, 5) }),
    'post /api/v1/pois': () => ({ building_id: building, name: 'Contract POI', position: { floor_id: floor, x: 5, y: 5 } }),
    'post /api/v1/pois_bulk': () => [{ building_id: building, name: 'Bulk POI', position: { floor_id: floor, x: 6, y: 6 } }],
    'post /api/v1/events': () => ({ building_id: building, name: 'Contract event', position: { floor_id: floor, x: 5, y: 5, radius: 3 } }),
    'post /api/v1/infrastructure': () => ({ building_id: building, type: 'wifi', name: 'Contract AP', bssid: '00:11:22:aa:bb:cc', position: { floor_id: floor, x: 5, y: 5 } }),
    'post /api/v1/realtime/positions': () => ({
      poses: [
        { device_id: 'contract-device', timestamp: Date.now() - 2000, building_id: building, floor_id: floor, x: 5, y: 5, accuracy: 2 },
        { device_id: 'contract-device', timestamp: Date.now() - 1000, building_id: building, floor_id: floor, x: 15, y: 15, accuracy: 2 },
      ],
    }),
    'post /api/v1/alarms': () => ({ type: 'DANGER', device_id: 'contract-device', building_id: building, floor_id: floor, x: 5, y: 5 }),
    'patch /api/v1/alarms/{id}': () => ({ state: 'CONFIRMED' }),
    'post /api/v1/organizations': () => ({ name: 'Contract org', admin: { email: `org-${randomUUID().slice(0, 8)}@example.test`, password: 'contract-password-1', full_name: 'Org admin' } }),
    'post /api/v1/users': () => ({ email: `user-${randomUUID().slice(0, 8)}@example.test`, password: 'contract-password-1', role: 'user', full_name: 'Contract user' }),
    'put /api/v1/buildings/{building_id}/paths': () => ({ nodes: [], links: [] }),
  };
  const key = `${operation.method} ${operation.path}`;
  if (examples[key]) return examples[key]!();
  const schema = operation.spec.requestBody?.content?.['application/json']?.schema;
  // An update sends one harmless field (every update is partial), not every field with made-up references.
  const renamed = ['name', 'full_name', 'description'].find((field) => schema?.properties?.[field]);
  if ((operation.method === 'put' || operation.method === 'patch') && renamed) return { [renamed]: `Renamed ${renamed}` };
  return sample(schema);
}

/** The path with its `{params}` filled: an object the pass created under that collection, else the venue's. */
function concretePath(operation: Operation): string {
  return operation.path.replace(/\{([a-z_]+)\}/g, (_match, name: string, offset: number) => {
    const collection = operation.path.slice(0, offset - 1);
    if (name === 'building_id') return String(venue.building.id);
    if (name === 'file') return String(created.get('console asset') ?? 'missing.js');
    const value = created.get(collection) ?? (collection === '/api/v1/buildings' ? venue.building.id : undefined);
    return encodeURIComponent(String(value ?? sample(operation.spec.parameters?.find((p: Schema) => p.name === name)?.schema, name)));
  });
}

function queryOf(operation: Operation): string {
  const query = new URLSearchParams();
  for (const parameter of operation.spec.parameters ?? []) {
    // Searches need at least one filter: the venue's building is the natural one.
    if (parameter.in !== 'query' || !(parameter.required || parameter.name === 'building_id')) continue;
    query.set(parameter.name, String(sample(parameter.schema, parameter.name)));
  }
  for (const [name, value] of Object.entries(operation.extraQuery ?? {})) query.set(name, value);
  const text = query.toString();
  return text ? `?${text}` : '';
}

async function call(operation: Operation): Promise<Response> {
  const headers: Record<string, string> = {};
  const security: Schema[] = operation.spec.security ?? [];
  if (security.some((requirement) => 'basic' in requirement)) headers.authorization = basicAuth(ADMIN_EMAIL, ADMIN_PASSWORD);
  else if (operation.method === 'get' && security.some((requirement) => Object.keys(requirement).join() === 'apiKey')) headers['x-api-key'] = apiKey;
  else if (security.some((requirement) => 'bearer' in requirement)) headers.authorization = `Bearer ${token}`;
  let body: BodyInit | undefined;
  const content = operation.spec.requestBody?.content ?? {};
  if (content['multipart/form-data']) {
    const form = new FormData();
    form.append('image', blobOf(pngBytes(4, 4), 'image/png'), 'contract.png');
    const encoded = await encodeForm(form);
    body = new Uint8Array(encoded.body);
    headers['content-type'] = encoded.contentType;
  } else if (content['application/json']) {
    let value = exampleBody(operation);
    if (operation.path === '/api/v1/auth/refresh_access_tokens') value = await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD);
    body = JSON.stringify(value);
    headers['content-type'] = 'application/json';
  }
  return fetch(running.baseUrl + concretePath(operation) + queryOf(operation), { method: operation.method.toUpperCase(), headers, body });
}

/** What is wrong with an answer, according to the document; empty when it tells the truth. */
function disagreements(operation: Operation, response: Response, text: string): string[] {
  const problems: string[] = [];
  const responses = operation.spec.responses as Record<string, Schema>;
  const status = response.status;
  const declared = responses[String(status)] ?? (status >= 400 ? responses.default : undefined);
  if (!declared) return [`status ${status} is not documented (documented: ${Object.keys(responses).join(', ')}): ${text.slice(0, 200)}`];
  const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
  if (!declared.content) {
    if (text !== '') problems.push(`status ${status} is documented without content but has a ${mediaType} body`);
    return problems;
  }
  const entry = declared.content[mediaType];
  if (!entry) return [`media type ${mediaType || '(none)'} is not documented for ${status} (documented: ${Object.keys(declared.content).join(', ')})`];
  if (mediaType === 'application/json') {
    const body = JSON.parse(text);
    problems.push(...validator.errors(entry.schema, body).map((error) => `body: ${error}`));
    if (status >= 400 && body.status !== status) problems.push(`error body status ${body.status} differs from HTTP ${status}`);
  }
  return problems;
}

function operationsOf(doc: Schema): Operation[] {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Schema>)) {
    for (const [method, spec] of Object.entries(item)) operations.push({ method, path, spec: spec as Schema });
  }
  // Creations first (their ids feed the rest), deletions last, each in the document's order, and the
  // deletion of a building after everything that lives in it.
  const rank = (operation: Operation) => METHOD_ORDER.indexOf(operation.method) * 10 + (operation.method === 'delete' && operation.path.startsWith('/api/v1/buildings/') ? 1 : 0);
  operations.sort((a, b) => rank(a) - rank(b));
  // Documented alternatives get their own call: the compact views, and a repeat of an OPEN alarm (200, not 201).
  const find = (method: string, path: string) => operations.find((o) => o.method === method && o.path === path)!;
  const variants = [
    { ...find('get', '/api/v1/buildings'), extraQuery: { view: 'compact' } },
    { ...find('get', '/api/v1/buildings/{id}'), extraQuery: { view: 'compact' } },
    find('post', '/api/v1/alarms'),
  ];
  operations.splice(operations.findIndex((o) => o.method === 'get'), 0, ...variants);
  return operations;
}

describe('the OpenAPI document tells the whole truth', () => {
  beforeAll(async () => {
    running = await startTestGateway();
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    admin = running.client.withToken(token);
    apiKey = await createApiKey(admin, 'read-write');
    venue = await createVenue(admin, 'Contract venue');
    adminUserId = (await admin.get('/api/v1/users/me')).body?.id ?? (await admin.get('/api/v1/users')).body.data?.[0]?.id;
    document = await (await fetch(`${running.baseUrl}/api/v1/openapi.json`)).json();
    validator = new DocumentValidator(document);
    const page = await (await fetch(`${running.baseUrl}/console`)).text();
    const asset = /assets\/([^"']+\.js)/.exec(page)?.[1];
    if (asset) created.set('console asset', asset);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('every operation answers a documented status, media type and body', async () => {
    const failures: string[] = [];
    const succeeded = new Set<string>();
    const failed: string[] = [];
    const statuses = new Map<string, number[]>();
    const operations = operationsOf(document);
    expect(operations.length).toBeGreaterThan(100);
    for (const operation of operations) {
      const name = `${operation.method.toUpperCase()} ${operation.path}${operation.extraQuery ? `?${new URLSearchParams(operation.extraQuery)}` : ''}`;
      const response = await call(operation);
      const text = await response.text();
      failures.push(...disagreements(operation, response, text).map((problem) => `${name}: ${problem}`));
      statuses.set(name, [...(statuses.get(name) ?? []), response.status]);
      if (response.ok) succeeded.add(name);
      else if (response.status !== 304) failed.push(`${name}: ${response.status} ${text.slice(0, 160)}`);
      if (response.status === 201 && !operation.path.includes('{')) {
        const id = (JSON.parse(text) as { id?: unknown }).id;
        if (id !== undefined) created.set(operation.path, id);
      }
    }
    expect(failures).toEqual([]);
    expect(statuses.get('POST /api/v1/alarms'), 'a raise, then a repeat').toEqual([201, 200]);
    // Every read of the seeded venue must succeed: an error there would hide its real answer from the pass.
    const failedReads = operations.filter((o) => o.method === 'get' && !succeeded.has(`GET ${o.path}`)).map((o) => `GET ${o.path}`);
    expect(failedReads).toEqual([]);
    // Errors are checked against the document too, but an operation that only ever fails is barely tested.
    expect(failed, `${succeeded.size} of ${operations.length} succeeded`).toEqual([]);
  });
});
