import { describe, expect, it } from 'vitest';
import type { Principal } from '../../gateway/auth/principal.js';
import { PositionPipeline } from '../../gateway/pipeline/position-pipeline.js';
import { DeviceDirectory } from '../../gateway/realtime/device-directory.js';
import type { Bus } from '../../gateway/bus-channels.js';
import { StorageUnavailableError, toErrorBody } from '../../shared/errors.js';
import { createLogger } from '../../shared/logger.js';
import type { PositionWriter } from '../../shared/positions/position-writer.js';
import { idlePorts } from '../../testkit/pipeline-ports.js';

const ORG = 'org';
const silentBus = {
  nodeId: 'n',
  subscribe: async () => undefined,
  onResync: () => undefined,
  publish: async () => undefined,
} as unknown as Bus;

/**
 * A devices table (identifier -> owner) whose read-back leaves out the identifiers in `unreadable`: what the
 * embedded driver did to every device of a batch holding a `;` (review NC1, point 3), or a device deleted
 * between the insert and the read.
 */
function storageMissing(owners: Map<string, string | null>, unreadable: Set<string>) {
  const identifiersOf = (literal: string) => literal.slice(2, -2).split('","');
  return {
    execute: async (sql: string, params: unknown[]) => {
      const identifiers = identifiersOf(params[1] as string);
      if (sql.trim().startsWith('insert')) {
        for (const identifier of identifiers) if (!owners.has(identifier)) owners.set(identifier, null);
        return [];
      }
      return identifiers
        .filter((identifier) => owners.has(identifier) && !unreadable.has(identifier))
        .map((identifier) => ({ id: `id-${identifier}`, identifier, user_id: owners.get(identifier) ?? null }));
    },
  };
}

describe('device ownership fails closed', () => {
  it('fails a resolve (503, retryable) when a device is not read back, instead of answering it as unowned', async () => {
    const owners = new Map<string, string | null>([['colleague-phone', 'colleague']]);
    const directory = new DeviceDirectory(storageMissing(owners, new Set(['colleague-phone'])) as never, silentBus);
    const failure = await directory.resolve(ORG, ['colleague-phone', 'x;abc']).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StorageUnavailableError);
    expect((failure as StorageUnavailableError).status).toBe(503);
    expect((failure as StorageUnavailableError).headers?.['retry-after']).toBeDefined();
    expect(toErrorBody(failure)).toMatchObject({ status: 503, code: 'unavailable' });
    // Nothing half-read was cached: once the read works, the owner is known and the next resolve says so.
    const readable = new DeviceDirectory(storageMissing(owners, new Set()) as never, silentBus);
    expect((await readable.resolve(ORG, ['colleague-phone', 'x;abc'])).map((device) => device.userId)).toEqual(['colleague', null]);
  });

  it("refuses a plain user's upload when the directory cannot read a device back: nothing is written", async () => {
    const owners = new Map<string, string | null>([['colleague-phone', 'colleague']]);
    const written: string[] = [];
    const pipeline = new PositionPipeline({
      registry: { peek: () => undefined, get: async () => undefined, buildingAt: async () => undefined } as never,
      devices: new DeviceDirectory(storageMissing(owners, new Set(['colleague-phone', 'x;abc'])) as never, silentBus),
      writer: {
        write: async (records: { deviceId: string }[]) => void written.push(...records.map((record) => record.deviceId)),
      } as unknown as PositionWriter,
      logger: createLogger('silent'),
      ...idlePorts,
    });
    const me: Principal = {
      userId: 'me',
      email: 'me@x.test',
      organizationId: ORG,
      role: 'user',
      platformAdmin: false,
      permission: 'read-write',
      via: 'jwt',
    };
    const pose = (device_id: string) => ({ device_id, timestamp: Date.now() - 1000, lat: 40.1, lng: -3.2 });
    await expect(pipeline.process(me, [pose('colleague-phone'), pose('x;abc')])).rejects.toBeInstanceOf(StorageUnavailableError);
    expect(written).toEqual([]);
  });

  it('fails the upload when the directory answers no device for a pose, whoever asks', async () => {
    const pipeline = new PositionPipeline({
      registry: { peek: () => undefined, get: async () => undefined, buildingAt: async () => undefined } as never,
      devices: { resolve: async (_: string, identifiers: string[]) => identifiers.map(() => undefined) } as never,
      writer: { write: async () => undefined } as unknown as PositionWriter,
      logger: createLogger('silent'),
      ...idlePorts,
    });
    const admin: Principal = {
      userId: 'a',
      email: 'a@x.test',
      organizationId: ORG,
      role: 'admin',
      platformAdmin: false,
      permission: 'read-write',
      via: 'jwt',
    };
    await expect(pipeline.process(admin, [{ device_id: 'd', timestamp: Date.now() - 1000, lat: 40.1, lng: -3.2 }])).rejects.toThrow(
      /could not be read/,
    );
  });
});
