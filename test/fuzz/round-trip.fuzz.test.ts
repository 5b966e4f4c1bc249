import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestResponse } from '../../testkit/http-client.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { FUZZ_LOG_LEVEL, FUZZ_ONLY, FUZZ_SEED, ROUND_TRIP_RUNS, checkParameters, clip, describeFailure } from './support/fuzz-settings.js';
import { NOT_ROUND_TRIPPED, WRITE_FIXTURES, type RoundTripContext, type WriteFixture } from './support/round-trip-fixtures.js';
import { TEXT_PIECES, fitLength, longestFor, setAt, textFieldsOf, textFor, valuesAt, type TextField } from './support/round-trip.js';
import { operationsOf, type Operation } from './support/http-operations.js';
import { seedWorld } from './support/seeded-world.js';

const FILE = 'test/fuzz/round-trip.fuzz.test.ts';

describe(`round trip: every write of the OpenAPI document stores its text exactly (${driverLabel}, seed ${FUZZ_SEED})`, () => {
  let running: RunningGateway;
  let context: RoundTripContext;
  let operations: Operation[];

  beforeAll(async () => {
    running = await startTestGateway({ LOG_LEVEL: FUZZ_LOG_LEVEL, WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' });
    const world = await seedWorld(running.client);
    let counter = 0;
    context = {
      ...world,
      client: world.admin,
      unique: () => ++counter,
      create: async (path, body) => {
        const response = await world.admin.post(path, body);
        if (response.status !== 201 && response.status !== 200)
          throw new Error(`creating a target with POST ${path}: ${response.status} ${response.text}`);
        return String(response.body.id);
      },
    };
    const document = await running.client.get('/api/v1/openapi.json');
    expect(document.status).toBe(200);
    operations = operationsOf(document.body).filter((operation) => ['POST', 'PUT', 'PATCH'].includes(operation.method));
  });
  afterAll(async () => running?.stop());

  it('has a round-trip fixture for every write of the document, or says why it stores nothing readable', () => {
    const uncovered = operations.map((operation) => operation.key).filter((key) => !(key in WRITE_FIXTURES) && !(key in NOT_ROUND_TRIPPED));
    expect(uncovered, 'add a fixture in test/fuzz/support/round-trip-fixtures.ts').toEqual([]);
    const stale = Object.keys(WRITE_FIXTURES).filter((key) => !operations.some((operation) => operation.key === key));
    expect(stale, 'fixtures of writes the document no longer has').toEqual([]);
  });

  /** One write with `texts` in its text fields: a 2xx must read back each exactly (or as documented). */
  async function roundTrip(
    operation: Operation,
    fixture: WriteFixture,
    fields: TextField[],
    texts: string[],
    target: () => Promise<string | undefined>,
  ): Promise<void> {
    let body = await fixture.body(context);
    const sentByField = new Map<string, string>();
    fields.forEach((field, index) => {
      let text = texts[index]!;
      if (fixture.unique?.includes(field.key)) text = fitLength(`u${context.unique()}-${text}`, field.maxLength);
      text = fixture.compose?.[field.key]?.(text) ?? text;
      sentByField.set(field.key, text);
      body = setAt(body, field.path, (current) => (current === undefined ? current : text));
    });
    const id = await target();
    const path = operation.path.replace(/\{[^}]+\}/, id ?? '');
    const response: TestResponse = await context.client.request(operation.method, path, { body });
    const summary = () => `${operation.method} ${path} ${clip(JSON.stringify(body), 400)} → ${response.status} ${clip(response.text, 300)}`;
    if (response.status >= 500 || response.status === 404) throw new Error(`a write answered ${response.status}: ${summary()}`);
    if (response.status >= 300) {
      // A refusal must be a JSON error naming the problem, and a text within the limits is no reason for one.
      if (!(response.body && typeof response.body.status === 'number'))
        throw new Error(`a refusal without a JSON error body: ${summary()}`);
      // Reasons there may be: a URL the text made invalid, a required name left blank once trimmed.
      const reason = fields.some((field, index) => fixture.compose?.[field.key] || (field.minLength > 0 && texts[index]!.trim() === ''));
      if (!reason) throw new Error(`free text within the documented limits was refused: ${summary()}`);
      return;
    }
    const readPath = operation.method === 'POST' ? `${operation.path}/${response.body?.id}` : path;
    const object = fixture.read ? await fixture.read(context, response, path, body) : (await context.client.get(readPath)).body;
    for (const field of fields) {
      if (fixture.notReadable?.[field.key]) continue;
      const sent = sentByField.get(field.key)!;
      const checks = fixture.checks?.[field.key] ?? [
        { read: (read: unknown) => valuesAt(read, field.path), expected: (text: string) => text },
      ];
      for (const check of checks) {
        const sentCount = valuesAt(body, field.path).length;
        const read = check.read(object);
        const expected = check.expected(sent);
        if (read.length !== sentCount || read.some((value) => value !== expected)) {
          throw new Error(
            `${field.key} did not read back as sent: expected ${JSON.stringify(expected)}, read ${clip(JSON.stringify(read), 300)}\n${summary()}`,
          );
        }
      }
    }
  }

  it('reads back every text field of every write exactly as sent (or as the route documents), at any length up to its limit', {
    timeout: 600_000,
  }, async () => {
    const failures: string[] = [];
    let written = 0;
    const started = Date.now();
    for (const operation of operations) {
      if (FUZZ_ONLY && !operation.key.includes(FUZZ_ONLY)) continue;
      const fixture = WRITE_FIXTURES[operation.key];
      if (!fixture || operation.body === 'multipart') continue;
      let madeTarget: string | undefined;
      const target = async () => {
        if (!fixture.target) return undefined;
        if (fixture.freshTarget || madeTarget === undefined) madeTarget = await fixture.target(context);
        return madeTarget;
      };
      const fields = textFieldsOf(operation.body).filter((field) => !fixture.notWritten?.[field.key]);
      // A text field the base body leaves out would go untested: the fixture must send it or say why not.
      await target();
      const base = await fixture.body(context);
      const unsent = fields.filter((field) => valuesAt(base, field.path).every((value) => value === undefined)).map((field) => field.key);
      if (unsent.length > 0) {
        failures.push(`✗ ${operation.key}: its fixture's body sends no ${unsent.join(', ')} (send it, or list it in notWritten with why)`);
        continue;
      }
      const property = fc.asyncProperty(fc.tuple(...fields.map(textFor)), async (texts) => {
        written++;
        await roundTrip(operation, fixture, fields, texts, target);
      });
      const longest = fields.map((field) => longestFor(field));
      const details = await fc.check(property, {
        ...checkParameters(Math.min(fixture.runs ?? ROUND_TRIP_RUNS, ROUND_TRIP_RUNS)),
        examples: [[longest] as never],
      });
      if (details.failed)
        failures.push(
          describeFailure(operation.key, details, (counterexample) => clip(JSON.stringify(counterexample), 600), `${FILE} -t 'reads back'`),
        );
    }
    console.info(`round trip (${driverLabel}): ${written} writes in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    if (failures.length > 0) expect.fail(`${failures.length} write(s) failed:\n\n${failures.join('\n\n')}\n`);
  });

  it('refuses a value of another JSON type in any text field (4xx), never storing it as its text', { timeout: 300_000 }, async () => {
    const failures: string[] = [];
    const others: unknown[] = [{ a: 1 }, ['a'], 5, true];
    for (const operation of operations) {
      if (FUZZ_ONLY && !operation.key.includes(FUZZ_ONLY)) continue;
      const fixture = WRITE_FIXTURES[operation.key];
      if (!fixture || operation.body === 'multipart') continue;
      const target = fixture.target ? await fixture.target(context) : undefined;
      for (const field of textFieldsOf(operation.body).filter((candidate) => !fixture.notWritten?.[candidate.key])) {
        const allowed = (value: unknown) =>
          field.types.includes(Array.isArray(value) ? 'array' : typeof value === 'number' ? 'integer' : typeof value);
        for (const value of others.filter((candidate) => !allowed(candidate))) {
          const body = setAt(await fixture.body(context), field.path, (current) => (current === undefined ? current : value));
          const path = operation.path.replace(/\{[^}]+\}/, target ?? '');
          const response = await context.client.request(operation.method, path, { body });
          if (response.status < 400 || response.status >= 500 || response.status === 404)
            failures.push(`✗ ${operation.key} ${field.key} = ${JSON.stringify(value)} → ${response.status} ${clip(response.text, 200)}`);
        }
      }
    }
    if (failures.length > 0) expect.fail(`${failures.length} write(s) took or broke on a non-string:\n${failures.join('\n')}\n`);
  });

  it('answers list filters holding such text with 2xx or 4xx, never 5xx', { timeout: 300_000 }, async () => {
    const document = await running.client.get('/api/v1/openapi.json');
    const lists = operationsOf(document.body).filter(
      (operation) =>
        operation.method === 'GET' &&
        operation.pathParams.length === 0 &&
        operation.queryParams.some(
          (parameter) => parameter.schema?.type === 'string' || parameter.schema?.type === 'array' || parameter.schema?.anyOf,
        ),
    );
    expect(lists.length).toBeGreaterThan(3);
    const failures: string[] = [];
    const text = fc.array(fc.constantFrom(...TEXT_PIECES), { minLength: 1, maxLength: 8 }).map((parts) => parts.join(''));
    for (const operation of lists) {
      if (FUZZ_ONLY && !operation.key.includes(FUZZ_ONLY)) continue;
      const names = operation.queryParams.map((parameter) => parameter.name);
      const property = fc.asyncProperty(fc.constantFrom(...names), text, async (name, value) => {
        const response = await context.client.get(`${operation.path}?${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
        if (response.status >= 500 || !(response.status < 300 || (response.body && typeof response.body.status === 'number'))) {
          throw new Error(`${operation.path}?${name}=${JSON.stringify(value)} → ${response.status} ${clip(response.text, 300)}`);
        }
      });
      const details = await fc.check(property, checkParameters(Math.max(ROUND_TRIP_RUNS, names.length * 2)));
      if (details.failed)
        failures.push(
          describeFailure(operation.key, details, (counterexample) => JSON.stringify(counterexample), `${FILE} -t 'list filters'`),
        );
    }
    if (failures.length > 0) expect.fail(`${failures.length} list(s) failed:\n\n${failures.join('\n\n')}\n`);
  });
});
