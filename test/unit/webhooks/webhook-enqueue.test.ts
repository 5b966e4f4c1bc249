import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../shared/logger.js';
import { loadConfig } from '../../../shared/config.js';
import type { ZoneEventRecord } from '../../../shared/detection/zone-event.js';
import type { JobQueue } from '../../../shared/jobs/index.js';
import type { Storage } from '../../../shared/storage/index.js';
import { WebhookService } from '../../../gateway/webhooks/webhook-service.js';

const ORG = '11111111-1111-4111-8111-111111111111';

const zoneEvent = (i: number, type: 'enter' | 'exit'): ZoneEventRecord => ({
  organizationId: ORG,
  buildingId: 7,
  floorId: 3,
  zoneId: `zone-${i}`,
  zoneName: `Zone ${i}`,
  zoneKind: 'geofence',
  deviceId: `device-${i}`,
  userId: null,
  type,
  at: Date.UTC(2026, 10, 24, 3, 0, i),
  firedAt: Date.UTC(2026, 10, 24, 3, 0, i),
});

/** A storage that answers the subscription lookup with `subscribed` and records every statement. */
function recordingStorage(subscribed: { organization_id: string; type: string }[]) {
  const statements: { sql: string; params: readonly unknown[] }[] = [];
  const storage = {
    execute: async (sql: string, params: readonly unknown[] = []) => {
      statements.push({ sql, params });
      if (/from webhooks/.test(sql) && !/insert into/.test(sql)) return subscribed;
      return [];
    },
  } as unknown as Storage;
  return { storage, statements };
}

const service = (storage: Storage) => new WebhookService(storage, {} as JobQueue, loadConfig({}), createLogger('silent'));

describe('webhook deliveries of detected zone events', () => {
  it('sends nothing to store when no webhook of the organization asks for geofence events', async () => {
    const { storage, statements } = recordingStorage([{ organization_id: ORG, type: 'alarm.raised' }]);
    await service(storage).detectionsStored([zoneEvent(1, 'enter'), zoneEvent(2, 'exit')], []);
    expect(statements.some(({ sql }) => /insert into webhook_deliveries/.test(sql))).toBe(false);
  });

  it('stores only the events of the types some webhook asks for', async () => {
    const { storage, statements } = recordingStorage([{ organization_id: ORG, type: 'geofence.exit' }]);
    await service(storage).detectionsStored([zoneEvent(1, 'enter'), zoneEvent(2, 'exit'), zoneEvent(3, 'exit')], []);
    const insert = statements.find(({ sql }) => /insert into webhook_deliveries/.test(sql));
    expect(insert).toBeDefined();
    const rows = JSON.parse(insert!.params[0] as string) as { type: string; key: string }[];
    expect(rows.map((row) => row.type)).toEqual(['geofence.exit', 'geofence.exit']);
  });
});
