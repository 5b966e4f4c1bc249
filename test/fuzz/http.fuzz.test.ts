import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { seededRuns } from '../../testkit/seeded-runs.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { TestSocket } from '../../testkit/ws-client.js';
import {
  FUZZ_LOG_LEVEL,
  FUZZ_ONLY,
  FUZZ_RUNS,
  FUZZ_SEED,
  checkParameters,
  describeFailure,
  isKnownDefect,
} from './support/fuzz-settings.js';
import {
  concrete,
  nulEverywhere,
  operationsOf,
  renderRequest,
  requestArbitrary,
  send,
  violations,
  type ConcreteRequest,
  type Operation,
  type SymbolicRequest,
} from './support/http-operations.js';
import { seedWorld, type SeededWorld } from './support/seeded-world.js';

const FILE = 'test/fuzz/http.fuzz.test.ts';
/** Small enough that the oversize case is cheap, large enough for every valid-looking body. */
const MAX_BODY_BYTES = 256 * 1024;

describe(`fuzz: every operation of the served OpenAPI document (${driverLabel}, seed ${FUZZ_SEED}, ${FUZZ_RUNS} runs each)`, () => {
  let running: RunningGateway;
  let world: SeededWorld;
  let operations: Operation[];

  beforeAll(async () => {
    running = await startTestGateway({
      MAX_BODY_BYTES: String(MAX_BODY_BYTES),
      MAX_IMAGE_BYTES: String(MAX_BODY_BYTES),
      LOG_LEVEL: FUZZ_LOG_LEVEL,
    });
    world = await seedWorld(running.client);
    const document = await running.client.get('/api/v1/openapi.json');
    expect(document.status).toBe(200);
    operations = operationsOf(document.body).filter((operation) => !FUZZ_ONLY || operation.key.includes(FUZZ_ONLY));
  });
  afterAll(async () => {
    await running?.stop();
  });

  /** The seeded world, but with a new building (and floor) of its own. */
  async function freshBuilding(): Promise<SeededWorld> {
    const building = await world.admin.post('/api/v1/buildings', {
      name: 'Fresh',
      location: { lat: 40.4, lng: -3.7 },
      dimensions: { width: 50, length: 30 },
    });
    const floor = await world.admin.post('/api/v1/floors', { building_id: building.body.id, level: 0 });
    expect(floor.status, floor.text).toBe(201);
    return { ...world, ids: { ...world.ids, building: String(building.body.id), floor: String(floor.body.id) } };
  }

  /** Runs one property per operation and collects every failure, so one defect does not hide the others. */
  async function fuzzEach(
    test: string,
    selected: Operation[],
    property: (operation: Operation, sent: WeakMap<object, ConcreteRequest[]>) => fc.IAsyncPropertyWithHooks<[SymbolicRequest]>,
    runs?: number,
  ): Promise<string[]> {
    const failures: string[] = [];
    for (const operation of selected) {
      const sent = new WeakMap<object, ConcreteRequest[]>();
      const details = await fc.check(property(operation, sent), checkParameters(runs));
      if (details.failed) {
        failures.push(
          describeFailure(
            operation.key,
            details,
            (counterexample) =>
              (sent.get(counterexample as object) ?? []).map(renderRequest).join('\n-- and at the same time --\n') ||
              JSON.stringify(counterexample),
            `${FILE} -t '${test}'`,
          ),
        );
      }
    }
    return failures;
  }

  it('answers malformed and extreme requests to every operation with a 4xx JSON error, never a 5xx', { timeout: 300_000 }, async () => {
    expect(operations.length).toBeGreaterThan(FUZZ_ONLY ? 0 : 100);
    const failures = await fuzzEach('malformed and extreme', operations, (operation, sent) =>
      fc.asyncProperty(requestArbitrary(operation), async (symbolic) => {
        const request = await concrete(operation, symbolic, world, running.baseUrl, MAX_BODY_BYTES);
        sent.set(symbolic, [request]);
        const problem = violations(await send(request));
        if (problem) throw new Error(problem);
      }),
    );
    if (failures.length > 0) expect.fail(`${failures.length} operation(s) failed:\n\n${failures.join('\n\n')}\n`);
  });

  it('answers NUL in every string of every operation with a 4xx, never a 500 from PostgreSQL', { timeout: 120_000 }, async () => {
    if (isKnownDefect('nul-to-postgres')) return;
    const failures = await fuzzEach(
      'NUL in every string',
      operations,
      (operation, sent) =>
        fc.asyncProperty(nulEverywhere(operation), async (symbolic) => {
          const request = await concrete(operation, symbolic, world, running.baseUrl, MAX_BODY_BYTES);
          sent.set(symbolic, [request]);
          const problem = violations(await send(request));
          if (problem) throw new Error(problem);
        }),
      seededRuns(8, 3),
    );
    if (failures.length > 0) expect.fail(`${failures.length} operation(s) failed:\n\n${failures.join('\n\n')}\n`);
  });

  it('answers the same write sent twice at once without a 5xx (races on unique keys)', { timeout: 120_000 }, async () => {
    const writes = operations.filter((operation) => operation.method === 'PUT');
    const failures = await fuzzEach('sent twice at once', writes, (operation, sent) =>
      fc.asyncProperty(requestArbitrary(operation), async (symbolic) => {
        // Valid-looking and authenticated: the race is in the handler, past validation.
        const honest: SymbolicRequest = {
          ...symbolic,
          auth: 'admin',
          query: [],
          body: symbolic.body && {
            ...symbolic.body,
            mutation: { kind: 'none' },
            transport: { kind: 'json', contentType: 'application/json' },
          },
        };
        // Upserts race on their first write: a building's writes go to a building that has none yet.
        const target = operation.pathParams.some((parameter) => parameter.kind === 'building') ? await freshBuilding() : world;
        const request = await concrete(operation, honest, target, running.baseUrl, MAX_BODY_BYTES);
        sent.set(symbolic, [request, request]);
        const outcomes = await Promise.all([send(request), send(request), send(request)]);
        const problem = outcomes.map(violations).find(Boolean);
        if (problem) throw new Error(problem);
      }),
    );
    if (failures.length > 0) expect.fail(`${failures.length} operation(s) failed:\n\n${failures.join('\n\n')}\n`);
  });

  it('refuses poses whose coordinates lie far outside their building, or whose time is long past, with 422 naming the pose', async () => {
    const upload = (pose: Record<string, unknown>) =>
      world.admin.post('/api/v1/realtime/positions', {
        poses: [
          {
            device_id: 'fuzz-device-1',
            timestamp: Date.now() - 1000,
            building_id: Number(world.ids.building),
            floor_id: Number(world.ids.floor),
            x: 5,
            y: 5,
            ...pose,
          },
        ],
      });
    const physical = fc.oneof(
      fc.record({ x: fc.constantFrom(1e20, -1e20, 1e308, -1.7e308, 1e9) }),
      fc.record({ y: fc.constantFrom(1e20, -1e20, 1e308, -1.7e308, 1e9) }),
      fc.record({ x: fc.constantFrom(1.7e308, 1e20), y: fc.constantFrom(-1.7e308, -1e20) }),
      // Issue 13: timestamps no older than POSITIONS_MAX_AGE_SECONDS (7 days by default); these are far older.
      fc.record({ timestamp: fc.constantFrom(1, 2 ** 31, Date.parse('1970-01-02T00:00:00Z'), Date.now() - 400 * 86_400_000) }),
    );
    await fc.assert(
      fc.asyncProperty(physical, async (pose) => {
        const response = await upload(pose);
        expect(response.status, `${JSON.stringify(pose)} → ${response.status} ${response.text}`).toBe(422);
      }),
      { ...checkParameters(), endOnFailure: true },
    );
  });

  it('still answers afterwards: /healthz over HTTP and a ping over WebSocket', async () => {
    expect((await running.client.get('/healthz')).status).toBe(200);
    const socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${world.adminToken}` } });
    try {
      expect(await socket.request({ op: 'ping' })).toMatchObject({ op: 'pong' });
    } finally {
      socket.close();
    }
  });
});
