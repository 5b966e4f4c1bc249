import { Agent, request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineRoute } from '../../gateway/http/route.js';
import { OrganizationSchema, UserSchema } from '../../shared/storage/entities/index.js';
import { packageVersion } from '../../shared/version.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/** Signs a token for the bootstrapped admin directly (the token endpoints are tested with identity). */
async function adminToken(running: RunningGateway): Promise<string> {
  const user = await running.gateway.services.storage.em().findOneOrFail(UserSchema, { email: 'admin@example.test' });
  return running.gateway.services.tokens.sign({
    sub: user.id,
    email: user.email,
    organization_uuid: (user.organization as { id: string }).id,
    role: user.role,
    api_permission: 'read-write',
  });
}

/** Sends a request without fetch's conveniences, to control Content-Length and the body exactly. */
function rawRequest(baseUrl: string, method: string, path: string, headers: Record<string, string>, body?: string | Buffer | Buffer[]) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const url = new URL(path, baseUrl);
    // agent: false: a fresh connection every time, never a pooled keep-alive one.
    const req = httpRequest(
      { host: url.hostname, port: url.port, path: url.pathname + url.search, method, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    if (Array.isArray(body)) {
      // Pieces apart in time, so the server receives them as separate chunks.
      const write = (index: number): void => {
        if (index === body.length) return void req.end();
        req.write(body[index]);
        setTimeout(() => write(index + 1), 20);
      };
      return write(0);
    }
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** Probe routes mounted only by these tests: one echoes its JSON body, one takes its time. */
const probeRoutes = () => [
  defineRoute({
    method: 'PUT',
    path: '/api/v1/test-echo',
    summary: 'echo',
    auth: 'authenticated',
    handler: (request) => ({ body: { received: request.body ?? null } }),
  }),
  defineRoute({
    method: 'GET',
    path: '/test-stream',
    summary: 'stream',
    auth: 'public',
    // 64 MiB produced as fast as possible: far more than socket buffers hold, so the writer must wait for drains.
    handler: () => ({
      contentType: 'application/octet-stream',
      stream: (async function* () {
        const chunk = Buffer.alloc(64 * 1024, 0x61);
        for (let i = 0; i < 1024; i++) yield chunk;
      })(),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/test-slow',
    summary: 'slow',
    auth: 'public',
    handler: async () => {
      await new Promise((resolve) => setTimeout(resolve, 700));
      return { body: { finished: true } };
    },
  }),
];

describe(`gateway foundation (${driverLabel})`, () => {
  let running: RunningGateway;
  beforeAll(async () => {
    running = await startTestGateway({ MAX_BODY_BYTES: '4096' }, { extraRoutes: probeRoutes });
  });
  afterAll(async () => running?.stop());

  it('answers /healthz', async () => {
    const response = await running.client.get('/healthz');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: 'ok' });
  });

  it('answers /readyz with every driver checked', async () => {
    const response = await running.client.get('/readyz');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: 'ok', checks: { storage: 'ok', bus: 'ok', jobs: 'ok' } });
  });

  it('refuses /api/v1/version without credentials, with the flat error body', async () => {
    const response = await running.client.get('/api/v1/version');
    expect(response.status).toBe(401);
    expect(response.body).toMatchObject({ status: 401, code: 'unauthenticated' });
    expect(typeof response.body.message).toBe('string');
  });

  it('answers /api/v1/version to an authenticated caller, with or without trailing slash', async () => {
    const client = running.client.withToken(await adminToken(running));
    for (const path of ['/api/v1/version', '/api/v1/version/']) {
      const response = await client.get(path);
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ version: packageVersion });
    }
  });

  it('refuses a forged token', async () => {
    const token = await adminToken(running);
    const [header, payload] = token.split('.');
    const forged = `${header}.${payload}.${Buffer.from('not the signature').toString('base64url')}`;
    const response = await running.client.withToken(forged).get('/api/v1/version');
    expect(response.status).toBe(401);
  });

  it('answers unknown routes 404 with the JSON error body', async () => {
    const response = await running.client.get('/api/v1/no-such-thing');
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toContain('application/json');
    expect(response.body).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('answers a known path with the wrong method 405 and says which are allowed', async () => {
    const response = await running.client.delete('/healthz');
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    expect(response.body).toMatchObject({ status: 405, code: 'method_not_allowed' });
  });

  it('answers 413 to a body over MAX_BODY_BYTES, declared or streamed', async () => {
    const token = await adminToken(running);
    const big = JSON.stringify({ padding: 'x'.repeat(10_000) });
    const declared = await rawRequest(
      running.baseUrl,
      'POST',
      '/api/v1/openapi.json',
      { 'content-type': 'application/json', 'content-length': String(big.length) },
      big,
    );
    expect(declared.status).toBe(405); // GET-only route: the method is checked before the body
    const response = await rawRequest(
      running.baseUrl,
      'PUT',
      '/api/v1/test-echo',
      { 'content-type': 'application/json', 'content-length': String(big.length), authorization: `Bearer ${token}` },
      big,
    );
    expect(response.status).toBe(413);
    expect(JSON.parse(response.body)).toMatchObject({ status: 413, code: 'payload_too_large' });
    const chunked = await rawRequest(
      running.baseUrl,
      'PUT',
      '/api/v1/test-echo',
      { 'content-type': 'application/json', 'transfer-encoding': 'chunked', authorization: `Bearer ${token}` },
      big,
    );
    expect(chunked.status).toBe(413);
  });

  it('takes a body that arrives in pieces whole, with a declared length or chunked, a character split between pieces', async () => {
    const token = await adminToken(running);
    const text = 'é'.repeat(1500) + '€'.repeat(250); // 3,000 + 750 bytes of UTF-8
    const json = Buffer.from(JSON.stringify({ text }));
    // Cut inside a two-byte character (the body starts with `{"text":"`, 9 bytes) and a three-byte one.
    const pieces = [json.subarray(0, 10), json.subarray(10, 3010), json.subarray(3010, 3100), json.subarray(3100)];
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
    const declared = await rawRequest(
      running.baseUrl,
      'PUT',
      '/api/v1/test-echo',
      { ...headers, 'content-length': String(json.length) },
      pieces,
    );
    expect(declared.status, declared.body).toBe(200);
    expect(JSON.parse(declared.body)).toEqual({ received: { text } });
    const chunked = await rawRequest(running.baseUrl, 'PUT', '/api/v1/test-echo', { ...headers, 'transfer-encoding': 'chunked' }, pieces);
    expect(chunked.status, chunked.body).toBe(200);
    expect(JSON.parse(chunked.body)).toEqual({ received: { text } });
  });

  it('answers 400 to malformed JSON and accepts an empty JSON body', async () => {
    const token = await adminToken(running);
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
    const malformed = await rawRequest(running.baseUrl, 'PUT', '/api/v1/test-echo', headers, '{"a":');
    expect(malformed.status).toBe(400);
    expect(JSON.parse(malformed.body)).toMatchObject({ status: 400, code: 'invalid_json' });
    const empty = await rawRequest(running.baseUrl, 'PUT', '/api/v1/test-echo', { ...headers, 'content-length': '0' }, '');
    expect(empty.status).toBe(200);
    expect(JSON.parse(empty.body)).toEqual({ received: null });
    const ok = await rawRequest(running.baseUrl, 'PUT', '/api/v1/test-echo', headers, '{"a":1}');
    expect(JSON.parse(ok.body)).toEqual({ received: { a: 1 } });
  });

  it('serves an OpenAPI document that lists its routes', async () => {
    const response = await running.client.get('/api/v1/openapi.json');
    expect(response.status).toBe(200);
    expect(response.body.openapi).toBe('3.1.0');
    expect(Object.keys(response.body.paths)).toEqual(expect.arrayContaining(['/healthz', '/readyz', '/api/v1/version']));
    expect(response.body.paths['/api/v1/version'].get.security).not.toEqual([]);
  });

  it('streams a body far larger than the socket buffers to the end, waiting for drains, on an otherwise idle gateway', async () => {
    const response = await fetch(`${running.baseUrl}/test-stream`);
    expect(response.status).toBe(200);
    let received = 0;
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) received += chunk.byteLength;
    expect(received).toBe(64 * 1024 * 1024);
  });

  it('keeps a keep-alive connection usable after a 204 response', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string) =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port: new URL(running.baseUrl).port, path: '/healthz', method, agent }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      expect((await send('OPTIONS')).status).toBe(204);
      const second = await send('GET');
      expect(second).toEqual({ status: 200, reused: true });
    } finally {
      agent.destroy();
    }
  });

  it('documents every listed route in the OpenAPI document, and serves a docs page with no external assets', async () => {
    const document = (await running.client.get('/api/v1/openapi.json')).body;
    for (const route of running.gateway.routes) {
      const path = route.path.replace(/:([A-Za-z_]+)/g, '{$1}');
      const operation = document.paths[path]?.[route.method.toLowerCase()];
      if (route.hidden) expect(operation, `${route.method} ${route.path} is an alias`).toBeUndefined();
      else expect(operation, `${route.method} ${route.path}`).toBeDefined();
    }
    const page = await running.client.get('/api/v1/docs');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.text).not.toMatch(/(src|href)="https?:/);
    // NL9: the page cannot be framed and runs no inline script; its script is a file of its own.
    const policy = page.headers.get('content-security-policy')!;
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).toContain("script-src 'self'");
    expect(policy.match(/script-src[^;]*/)![0]).not.toContain('unsafe-inline');
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.text).not.toMatch(/<script>/);
    expect(page.text).toContain('<script src="/api/v1/docs.js"></script>');
    const script = await running.client.get('/api/v1/docs.js');
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toContain('text/javascript');
    expect(script.text).toContain("fetch('/api/v1/openapi.json'");
  });

  it('answers CORS preflights so the JS client can run in a browser', async () => {
    const response = await running.client.request('OPTIONS', '/api/v1/version', {
      headers: { origin: 'https://example.test', 'access-control-request-method': 'GET' },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(response.headers.get('access-control-allow-headers')).toContain('X-API-KEY');
  });

  it('creates the first organization and admin once, and keeps data across a restart', async () => {
    const em = running.gateway.services.storage.em();
    expect(await em.count(UserSchema, {})).toBe(1);
    const admin = await em.findOneOrFail(UserSchema, { email: 'admin@example.test' }, { populate: ['organization'] });
    expect(admin.platformAdmin).toBe(true);
    expect(admin.role).toBe('admin');
    expect(admin.passwordHash).not.toContain('admin-password-1');
    em.create(OrganizationSchema, { id: crypto.randomUUID(), name: 'Second', createdAt: new Date(), updatedAt: new Date() });
    await em.flush();

    running = await running.restart();
    const after = running.gateway.services.storage.em();
    expect(await after.count(UserSchema, {})).toBe(1);
    expect(await after.count(OrganizationSchema, {})).toBe(2);
    expect(running.gateway.bootstrap.created).toBe(false);
    // Tokens survive the restart too: the generated key lives under DATA_DIR.
    const response = await running.client.withToken(await adminToken(running)).get('/api/v1/version');
    expect(response.status).toBe(200);
  });
});

describe(`gateway shutdown (${driverLabel})`, () => {
  it('drains: a request in flight when the stop begins still gets its answer, new connections are refused', async () => {
    const running = await startTestGateway({}, { extraRoutes: probeRoutes });
    try {
      const inFlight = rawRequest(running.baseUrl, 'GET', '/test-slow', {});
      await new Promise((resolve) => setTimeout(resolve, 150));
      const closing = running.gateway.close();
      const response = await inFlight;
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toEqual({ finished: true });
      await expect(rawRequest(running.baseUrl, 'GET', '/healthz', {})).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      await closing;
    } finally {
      await running.environment.cleanup();
    }
  });
});
