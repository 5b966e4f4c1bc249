import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { NO_NUL_PATTERN, buildOpenApiDocument } from '../../gateway/http/openapi.js';
import { idParam, listParam } from '../../gateway/http/query-schemas.js';
import type { RouteDefinition } from '../../gateway/http/route.js';
import { buildAsyncApiDocument, clientFrames, serverFrames } from '../../gateway/ws/frames.schema.js';
import { configSchema } from '../../shared/config.js';
import { CONFIG_TABLE_END, CONFIG_TABLE_START, configDocComments, configurationTable } from '../../testkit/config-reference.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('docs/configuration.md', () => {
  const path = new URL('../../docs/configuration.md', import.meta.url);

  it('is the table generated from configSchema and its doc comments (UPDATE_DOCS=1 regenerates it)', () => {
    const text = readFileSync(path, 'utf8');
    const start = text.indexOf(CONFIG_TABLE_START);
    const end = text.indexOf(CONFIG_TABLE_END);
    expect(start, 'the generated-table markers').toBeGreaterThan(-1);
    expect(end).toBeGreaterThan(start);
    const generated = `${CONFIG_TABLE_START}\n${configurationTable()}\n`;
    if (process.env.UPDATE_DOCS) writeFileSync(path, text.slice(0, start) + generated + text.slice(end));
    else expect(text.slice(start, end), 'docs/configuration.md: UPDATE_DOCS=1 npx vitest run test/unit/docs.test.ts').toBe(generated);
  });

  it('documents every setting with a one-line doc comment in shared/config.ts, and no setting that does not exist', () => {
    const comments = configDocComments();
    expect([...comments.keys()].sort()).toEqual(Object.keys(configSchema.shape).sort());
    for (const [name, comment] of comments) expect(comment.length, name).toBeGreaterThan(10);
    const documented = [...read('docs/configuration.md').matchAll(/^\| `([A-Z_0-9]+)` \|/gm)].map((match) => match[1]);
    expect(documented.sort()).toEqual(Object.keys(configSchema.shape).sort());
  });
});

describe('README', () => {
  const readme = read('README.md');

  it('has exactly the two quick-start commands', () => {
    const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1));
    const commands = [...quickStart.matchAll(/```sh\n([^`]+)```/g)].map((match) => match[1]!.trim());
    expect(commands).toEqual(['npm ci && npm start', 'npm ci && npm test']);
  });

  it('links only to files that exist (README, docs/ and bench/README.md)', () => {
    const files = ['README.md', 'bench/README.md', 'CONTRIBUTING.md', ...docFiles('docs')];
    for (const file of files) {
      for (const match of read(file).matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)) {
        const target = match[1]!;
        if (/^[a-z]+:/.test(target)) continue; // http:, https:, mailto:
        expect(existsSync(new URL(target, new URL(`../../${file}`, import.meta.url))), `${file} links to ${target}`).toBe(true);
      }
    }
  });
});

function docFiles(dir: string): string[] {
  return readdirSync(new URL(`../../${dir}`, import.meta.url), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? docFiles(`${dir}/${entry.name}`) : entry.name.endsWith('.md') ? [`${dir}/${entry.name}`] : [],
  );
}

describe('OpenAPI generator', () => {
  const base = { summary: 's', auth: 'authenticated' as const, handler: () => ({}) };
  const operation = (route: Partial<RouteDefinition>) =>
    (buildOpenApiDocument([{ method: 'GET', path: '/x', ...base, ...route } as RouteDefinition]).paths as any)['/x'][
      (route.method ?? 'GET').toLowerCase()
    ];

  it('documents a raw answer at 200 with every media type it may have, never as 204', () => {
    const op = operation({ rawResponseDoc: { contentType: ['text/css', 'image/svg+xml'], description: 'asset' } });
    expect(Object.keys(op.responses)).toEqual(['200', '422', 'default']);
    expect(Object.keys(op.responses['200'].content)).toEqual(['text/css', 'image/svg+xml']);
    expect(Object.keys(operation({}).responses)).toEqual(['204', '422', 'default']);
  });

  it('documents the input parameters of a transformed query, required ones required', () => {
    const query = z.object({ date: z.string(), limit: z.coerce.number().optional() }).transform((q) => ({ window: q.date }));
    const parameters = operation({ query }).parameters.map((p: any) => [p.name, p.in, p.required]);
    expect(parameters).toEqual([
      ['date', 'query', true],
      ['limit', 'query', false],
    ]);
  });

  it('documents other answers beside the success one', () => {
    const op = operation({
      method: 'POST',
      response: z.object({ id: z.string() }),
      successStatus: 201,
      otherResponses: { 200: { description: 'repeat', schema: z.object({ id: z.string() }) } },
    });
    expect(Object.keys(op.responses).sort()).toEqual(['200', '201', '422', 'default']);
    expect(op.responses['200'].content['application/json'].schema.properties.id.type).toBe('string');
  });

  it('declares the credentials a route takes: sign-in (Basic or API key), any credential (an API key alone will do), or none', () => {
    expect(operation({ auth: 'public', signIn: true }).security).toEqual([{ basic: [] }, { apiKey: [] }, { apiKey: [], apiEmail: [] }]);
    expect(operation({}).security).toContainEqual({ apiKey: [] });
    expect(operation({}).security).toContainEqual({ bearer: [] });
    expect(operation({ auth: 'public' }).security).toEqual([]);
  });

  it('documents a list parameter as the array of its checked items, repeated or comma separated', () => {
    const query = z.object({ state: listParam(z.enum(['OPEN', 'CLOSED'])).optional(), ids: listParam(idParam) });
    const [state, ids] = operation({ query }).parameters;
    const items = { type: 'array', minItems: 1, items: { enum: ['OPEN', 'CLOSED'] } };
    expect(state).toMatchObject({ name: 'state', required: false, style: 'form', explode: true, schema: items });
    expect(ids).toMatchObject({ required: true, schema: { type: 'array', items: { type: 'integer', exclusiveMinimum: 0 } } });
    expect(state.description).toContain('commas');
  });

  it('documents that every string sent refuses NUL, and the 422 that says so', () => {
    const op = operation({ method: 'POST', body: z.object({ name: z.string(), id: z.uuid(), kind: z.enum(['a']) }) });
    const body = op.requestBody.content['application/json'].schema.properties;
    expect(body.name.pattern).toBe(NO_NUL_PATTERN);
    expect(new RegExp(NO_NUL_PATTERN).test('a\u0000b')).toBe(false);
    expect(body.id.pattern).not.toBe(NO_NUL_PATTERN);
    expect(body.kind.pattern).toBeUndefined();
    expect(op.responses['422'].description).toContain('NUL');
    // Answers are not requests: what the server sends keeps its plain strings.
    const answer = operation({ response: z.object({ name: z.string() }) }).responses['200'].content['application/json'].schema;
    expect(answer.properties.name.pattern).toBeUndefined();
  });

  it('documents HEAD beside each GET: the same answers without their bodies', () => {
    const route = { method: 'GET', path: '/x', ...base, response: z.object({ id: z.string() }) } as RouteDefinition;
    const paths = buildOpenApiDocument([route]).paths as any;
    expect(paths['/x'].head.parameters).toEqual(paths['/x'].get.parameters);
    expect(Object.keys(paths['/x'].head.responses)).toEqual(Object.keys(paths['/x'].get.responses));
    expect(Object.values(paths['/x'].head.responses).some((response: any) => 'content' in response)).toBe(false);
  });

  it('documents the full item type of a body validated item by item (bodyDoc)', () => {
    const op = operation({ method: 'POST', body: z.array(z.unknown()), bodyDoc: z.array(z.object({ name: z.string() })) });
    expect(op.requestBody.content['application/json'].schema.items.required).toEqual(['name']);
  });
});

describe('AsyncAPI document', () => {
  it('has a message and an operation for every client and server frame', () => {
    const document = buildAsyncApiDocument() as any;
    const names = [
      ...Object.keys(clientFrames).map((op) => `client_${op}`),
      ...Object.keys(serverFrames).map((op) => `server_${op}`),
    ].sort();
    expect(Object.keys(document.components.messages).sort()).toEqual(names);
    expect(Object.keys(document.operations).sort()).toEqual(names);
  });
});
