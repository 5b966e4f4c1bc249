import { describe, expect, it } from 'vitest';
import type { Principal } from '../../gateway/auth/principal.js';
import { PositionPipeline, type PipelineDependencies } from '../../gateway/pipeline/position-pipeline.js';
import type { Bus } from '../../shared/bus/index.js';
import { createLogger } from '../../shared/logger.js';
import type { PositionWriter } from '../../shared/positions/position-writer.js';

const principal: Principal = { userId: 'u', email: 'a@b.c', organizationId: 'org', role: 'admin', platformAdmin: false, permission: 'read-write', via: 'jwt' };
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
  const bus = { nodeId: 'n', publish: async (channel: string) => void events.push(`published on ${channel}`) } as unknown as Bus;
  const deps: PipelineDependencies = {
    registry: { peek: () => undefined, get: async () => undefined, buildingAt: async () => undefined } as never,
    devices: { resolve: async () => new Map() } as never,
    writer,
    bus,
    logger: createLogger('silent'),
  };
  return { pipeline: new PositionPipeline(deps), events, settle: (error?: Error) => settle(error) };
}

describe('position pipeline order', () => {
  it('publishes live positions before the commit, and acknowledges only after it', async () => {
    const { pipeline, events, settle } = pipelineWithHeldCommit();
    let acknowledged = false;
    const processing = pipeline.process(principal, [pose]).then(() => (acknowledged = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events).toEqual(['published on positions', 'commit started']);
    expect(acknowledged).toBe(false);
    settle();
    await processing;
    expect(acknowledged).toBe(true);
  });

  it('fails the upload when the commit fails, though its positions were already live', async () => {
    const { pipeline, events, settle } = pipelineWithHeldCommit();
    const processing = pipeline.process(principal, [pose]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    settle(new Error('database down'));
    await expect(processing).rejects.toThrow('database down');
    expect(events[0]).toBe('published on positions');
  });
});
