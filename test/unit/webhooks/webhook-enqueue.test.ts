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

/** A storage that answers the subscription lookup with `subscribed` and records every statement, and in which transaction. */
function recordingStorage(subscribed: { organization_id: string; type: string }[]) {
  const statements: { sql: string; params: readonly unknown[]; tx: number | null }[] = [];
  let transactions = 0;
  const executor =
    (tx: number | null) =>
    async (sql: string, params: readonly unknown[] = []) => {
      statements.push({ sql, params, tx });
      if (/from webhooks/.test(sql) && !/insert into/.test(sql)) return subscribed;
      return [];
    };
  const storage = {
    execute: executor(null),
    em: () => ({ transactional: async (run: (tx: unknown) => Promise<unknown>) => run({ execute: executor(++transactions) }) }),
  } as unknown as Storage;
  return { storage, statements };
}

const service = (storage: Storage) =>
  new WebhookService(storage, { schedule: async () => undefined } as unknown as JobQueue, loadConfig({}), createLogger('silent'));

describe('webhook deliveries of detected zone events', () => {
  it('stores them with the group commit, and nothing for webhooks, when no webhook of the organization asks for geofence events', async () => {
    const { storage, statements } = recordingStorage([{ organization_id: ORG, type: 'alarm.raised' }]);
    let groupCommits = 0;
    await service(storage).storeZoneEvents([zoneEvent(1, 'enter'), zoneEvent(2, 'exit')], async () => void groupCommits++);
    expect(groupCommits).toBe(1);
    expect(statements.some(({ sql }) => /insert into (webhook_deliveries|zone_events)/.test(sql))).toBe(false);
  });

  it('stores the zone events and the deliveries of the types some webhook asks for in one transaction', async () => {
    const { storage, statements } = recordingStorage([{ organization_id: ORG, type: 'geofence.exit' }]);
    let groupCommits = 0;
    await service(storage).storeZoneEvents(
      [zoneEvent(1, 'enter'), zoneEvent(2, 'exit'), zoneEvent(3, 'exit')],
      async () => void groupCommits++,
    );
    expect(groupCommits).toBe(0);
    const events = statements.find(({ sql }) => /insert into zone_events/.test(sql));
    const deliveries = statements.find(({ sql }) => /insert into webhook_deliveries/.test(sql));
    expect(events?.tx).toBe(1);
    expect(deliveries?.tx).toBe(1);
    expect((JSON.parse(events!.params[0] as string) as unknown[]).length).toBe(3);
    const rows = JSON.parse(deliveries!.params[0] as string) as { type: string; order_key: string }[];
    expect(rows.map((row) => [row.type, row.order_key])).toEqual([
      ['geofence.exit', 'device:device-2'],
      ['geofence.exit', 'device:device-3'],
    ]);
  });
});
