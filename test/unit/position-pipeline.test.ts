import { describe, expect, it } from 'vitest';
import type { Principal } from '../../gateway/auth/principal.js';
import { PositionPipeline, STAGE_STEPS, type PipelineDependencies, type SkippableStage } from '../../gateway/pipeline/position-pipeline.js';
import type { LivePositions } from '../../gateway/pipeline/ports.js';
import { EncodedPayload } from '../../shared/bus/index.js';
import { PositionsMessage } from '../../shared/positions/positions-message.js';
import { createLogger } from '../../shared/logger.js';
import type { PositionWriter } from '../../shared/positions/position-writer.js';
import { idlePorts } from '../../testkit/pipeline-ports.js';

const principal: Principal = {
  userId: 'u',
  email: 'a@b.c',
  organizationId: 'org',
  role: 'admin',
  platformAdmin: false,
  permission: 'read-write',
  via: 'jwt',
};
const pose = { device_id: 'phone-1', timestamp: Date.now() - 1000, lat: 40.1, lng: -3.2 };

/** A pipeline over fakes: the commit is held open until the test releases (or fails) it. */
function pipelineWithHeldCommit() {
  const events: string[] = [];
  let settle!: (error?: Error) => void;
  const writer = {
    write: () => {
      events.push('commit started');
      return new Promise<void>((resolve, reject) => (settle = (error) => (error ? reject(error) : resolve())));
    },
  } as unknown as PositionWriter;
  const live: LivePositions = {
    publish: async (organizationId, records) => {
      events.push(`published ${records.length} of ${organizationId}`);
      return new Map([[0, new EncodedPayload(new PositionsMessage(organizationId, records))]]);
    },
  };
  const deps: PipelineDependencies = {
    registry: { peek: () => undefined, get: async () => undefined, buildingAt: async () => undefined } as never,
    devices: {
      resolve: async (_: string, identifiers: string[]) => identifiers.map((identifier) => ({ id: identifier, identifier, userId: null })),
    } as never,
    writer,
    live,
    logger: createLogger('silent'),
    alarms: { raise: async () => void events.push('alarms raised') },
    owners: {
      admit: () => void events.push('paced'),
      handOff: async (records, published) => void events.push(`handed ${records.length} to owners${published ? ', as published' : ''}`),
    },
  };
  return { pipeline: new PositionPipeline(deps), events, settle: (error?: Error) => settle(error) };
}

describe('position pipeline order', () => {
  it('publishes live positions before the commit, and acknowledges only after it', async () => {
    const { pipeline, events, settle } = pipelineWithHeldCommit();
    let acknowledged = false;
    const processing = pipeline.process(principal, [pose]).then(() => (acknowledged = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events).toEqual(['alarms raised', 'paced', 'published 1 of org', 'commit started']);
    expect(acknowledged).toBe(false);
    settle();
    await processing;
    expect(acknowledged).toBe(true);
    expect(events.at(-1)).toBe('handed 1 to owners, as published');
  });

  it('fails the upload when the commit fails, though its positions were already live', async () => {
    const { pipeline, events, settle } = pipelineWithHeldCommit();
    const processing = pipeline.process(principal, [pose]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    settle(new Error('database down'));
    await expect(processing).rejects.toThrow('database down');
    expect(events).toEqual(['alarms raised', 'paced', 'published 1 of org', 'commit started']); // nothing handed to owners
  });
});

describe('position pipeline validation (clock injected through receivedAt)', () => {
  const DAY = 24 * 3600_000;
  const receivedAt = Date.UTC(2026, 10, 23, 12);
  const plainUser: Principal = { ...principal, userId: 'me', role: 'user' };

  /** A pipeline whose registry knows one building near the pole (where x/y can leave the map) and whose
   * directory knows `owned-by-colleague`; it records what reached the writer. */
  function pipelineOverFakes(maxAgeMs?: number) {
    const written: string[] = [];
    const known = new Map([
      ['owned-by-colleague', { id: 'x', identifier: 'owned-by-colleague', userId: 'colleague' }],
      ['mine', { id: 'y', identifier: 'mine', userId: 'me' }],
    ]);
    const runtime = {
      id: 7,
      organizationId: 'org',
      floors: new Map([[1, { level: 0, levelHeight: 3 }]]),
      transform: { toGeo: ({ x }: { x: number; y: number }) => (x > 9_000 ? { lat: 89.99, lng: Number.NaN } : { lat: 40, lng: -3 }) },
    };
    const deps: PipelineDependencies = {
      registry: { peek: () => runtime, get: async () => runtime, buildingAt: async () => undefined } as never,
      devices: {
        resolve: async (_: string, identifiers: string[]) =>
          identifiers.map((identifier) => known.get(identifier) ?? { id: identifier, identifier, userId: null }),
      } as never,
      writer: {
        write: async (records: { deviceId: string }[]) => void written.push(...records.map((r) => r.deviceId)),
      } as unknown as PositionWriter,
      logger: createLogger('silent'),
      ...idlePorts,
      maxAgeMs,
    };
    return { pipeline: new PositionPipeline(deps), written };
  }
  const fields = async (run: Promise<unknown>) => {
    const error = (await run.then(
      () => undefined,
      (e) => e,
    )) as { status?: number; errors?: { field: string }[] } | undefined;
    return error?.errors?.map((e) => e.field) ?? [];
  };

  it('accepts [receivedAt - max age, receivedAt + 5 min] and refuses either side, by index', async () => {
    const { pipeline, written } = pipelineOverFakes(2 * DAY);
    const at = (timestamp: number, device_id = 'd') => ({ device_id, timestamp, lat: 1, lng: 1 });
    await pipeline.process(principal, [at(receivedAt - 2 * DAY, 'edge-old'), at(receivedAt + 5 * 60_000, 'edge-new')], receivedAt);
    expect(written).toEqual(['edge-old', 'edge-new']);
    expect(
      await fields(
        pipeline.process(principal, [at(receivedAt), at(receivedAt - 2 * DAY - 1), at(receivedAt + 5 * 60_000 + 1)], receivedAt),
      ),
    ).toEqual(['poses.1.timestamp', 'poses.2.timestamp']);
  });

  it('defaults the max age to 7 days', async () => {
    const { pipeline } = pipelineOverFakes();
    const at = (timestamp: number) => ({ device_id: 'd', timestamp, lat: 1, lng: 1 });
    expect(
      await fields(pipeline.process(principal, [at(receivedAt - 7 * DAY + 1000), at(receivedAt - 7 * DAY - 1000)], receivedAt)),
    ).toEqual(['poses.1.timestamp']);
  });

  it('refuses x/y beyond 10 km and x/y whose derived lat/lng is not on Earth, before anything is written', async () => {
    const { pipeline, written } = pipelineOverFakes();
    const indoor = (x: number, y = 0) => ({ device_id: 'd', timestamp: receivedAt, building_id: 7, floor_id: 1, x, y });
    expect(await fields(pipeline.process(principal, [indoor(1), indoor(1e20), indoor(0, -10_001), indoor(9_500)], receivedAt))).toEqual([
      'poses.1.x',
      'poses.2.y',
      'poses.3.x',
    ]);
    expect(written).toEqual([]);
  });

  it('lets a plain user upload for unassigned devices and their own only, whatever user_id says', async () => {
    const { pipeline, written } = pipelineOverFakes();
    const pose = (device_id: string, user_id?: string) => ({
      device_id,
      timestamp: receivedAt,
      lat: 1,
      lng: 1,
      ...(user_id ? { user_id } : {}),
    });
    const me = '00000000-0000-4000-8000-000000000001';
    const user: Principal = { ...plainUser, userId: me };
    const forged = pipeline.process(user, [pose('new-device'), pose('owned-by-colleague', me)], receivedAt);
    await expect(forged).rejects.toMatchObject({ status: 403, message: expect.stringContaining('poses.1') });
    await expect(pipeline.process(user, [pose('owned-by-colleague')], receivedAt)).rejects.toMatchObject({ status: 403 });
    expect(written).toEqual([]);
    await pipeline.process(user, [pose('new-device', me)], receivedAt);
    expect(written).toEqual(['new-device']);
    await pipeline.process(principal, [pose('owned-by-colleague')], receivedAt); // an admin uploads for anyone
    expect(written).toEqual(['new-device', 'owned-by-colleague']);
  });
});

describe('BENCH_SKIP_STAGE: each switch takes exactly its stage out of the hot path', () => {
  /** A pipeline over fakes that record what each stage did with one upload. */
  function recordingPipeline(skipStage?: SkippableStage) {
    const events: string[] = [];
    const deps: PipelineDependencies = {
      registry: { peek: () => undefined, get: async () => undefined, buildingAt: async () => undefined } as never,
      devices: {
        resolve: async (_: string, identifiers: string[]) =>
          identifiers.map((identifier) => ({ id: identifier, identifier, userId: null })),
      } as never,
      writer: { write: async (records: unknown[]) => void events.push(`stored ${records.length}`) } as unknown as PositionWriter,
      live: {
        publish: async () => {
          events.push('published');
          return new Map();
        },
      },
      logger: createLogger('silent'),
      alarms: { raise: async () => void events.push('alarms raised') },
      owners: {
        admit: () => void events.push('paced'),
        handOff: async (records) => void events.push(`handed ${records.length} to owners`),
      },
      skipStage,
    };
    return { pipeline: new PositionPipeline(deps), events };
  }
  const everything = ['alarms raised', 'paced', 'published', 'stored 1', 'handed 1 to owners'];
  const takenAway: Record<Exclude<SkippableStage, 'none'>, string[]> = {
    store: ['stored 1'],
    bus: ['published'],
    detection: ['paced', 'handed 1 to owners'],
  };

  it('runs every stage when nothing is skipped (unset or none)', async () => {
    for (const skip of [undefined, 'none'] as const) {
      const { pipeline, events } = recordingPipeline(skip);
      await pipeline.process(principal, [pose]);
      expect(events).toEqual(everything);
    }
  });

  for (const [stage, missing] of Object.entries(takenAway) as [Exclude<SkippableStage, 'none'>, string[]][]) {
    it(`${stage}: the upload is acknowledged with every other stage done, and only that one left out`, async () => {
      const { pipeline, events } = recordingPipeline(stage);
      const batch = await pipeline.process(principal, [pose]);
      expect(batch.records).toHaveLength(1);
      expect(events).toEqual(everything.filter((event) => !missing.includes(event)));
      // Resolved once into the list of steps: the hot path holds no step of the stage.
      const full = recordingPipeline().pipeline.steps.map((step) => step.name);
      expect(pipeline.steps.map((step) => step.name)).toEqual(
        full.filter((name) => !(STAGE_STEPS[stage] as readonly string[]).includes(name)),
      );
    });
  }
});
