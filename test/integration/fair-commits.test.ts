import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DetectionOutbox, ZONE_EVENTS_PER_STORE } from '../../gateway/detection/detection-outbox.js';
import { emptyDetections } from '../../gateway/detection/detections.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import { createLogger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { PositionStore } from '../../shared/positions/position-store.js';
import { PositionWriter } from '../../shared/positions/position-writer.js';
import type { Storage } from '../../shared/storage/index.js';
import { outdoorRecord } from '../../testkit/positions.js';
import { driverLabel, openOrganizationStorage } from '../../testkit/test-environment.js';

const OTHER_TENANT = '00000000-0000-4000-8000-0000000000b2';

/**
 * Issue 28 item 6 on a real database: an entry of many zone events goes through the group commit in parts (each
 * its own insert, so another write can be committed between two), and every event is stored exactly once, even
 * when the database refuses one part for a while.
 */
describe(`zone events stored in parts through the group commit (${driverLabel})`, () => {
  let storage: Storage;
  let organizationId: string;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ storage, organizationId, close } = await openOrganizationStorage());
  });
  afterAll(async () => close?.());

  it('stores each zone event once, in parts, and commits a write arriving meanwhile between two parts', async () => {
    const now = Date.UTC(2026, 10, 27, 12);
    const count = ZONE_EVENTS_PER_STORE * 2 + 17;
    const events: ZoneEventRecord[] = Array.from({ length: count }, (_, i) => ({
      organizationId,
      buildingId: 7,
      floorId: 3,
      zoneKind: 'geofence',
      zoneId: 'fence-parts',
      zoneName: 'Fence',
      deviceId: `parts-${i}`,
      userId: null,
      type: 'enter',
      at: now + i,
      firedAt: now + i,
    }));
    const store = new PositionStore(storage);
    const record = outdoorRecord({ organizationId: OTHER_TENANT, deviceId: 'other-tenant', timestamp: now });
    await store.ensurePartitions([record]); // its day's partition exists: the write joins the queue at once
    // What each insert held, in order: zone events counted, positions named.
    const inserts: string[] = [];
    let parts = 0;
    let outages = 1;
    const insert = store.insert.bind(store);
    store.insert = async (records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[] = [], options = {}) => {
      inserts.push(records.length > 0 ? records.map((record) => record.deviceId).join(',') : `${zoneEvents.length} events`);
      // The second part meets the database away, once: nothing of it is stored, and it is tried again.
      if (zoneEvents.length > 0 && ++parts === 2 && outages-- > 0)
        throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
      return insert(records, zoneEvents, options);
    };
    // At most 100 rows a commit, whatever the budget says: each part goes alone, whatever this host's speed.
    const writer = new PositionWriter(store, 100, 1, { commitBudgetMs: 5 });
    let other: Promise<void> | undefined;
    const outbox = new DetectionOutbox(
      {
        storeZoneEvents: async (zoneEvents) => {
          const storing = writer.write([], zoneEvents);
          if (!other) {
            // Another tenant's upload arrives while the first part is being committed.
            await new Promise((resolve) => setImmediate(resolve));
            other = writer.write([record]);
          }
          return storing;
        },
        raiseAlarm: async () => {},
        announce: async () => {},
      },
      createLogger('silent'),
    );
    outbox.add({ ...emptyDetections(), zoneEvents: events }, false);
    await outbox.drain(); // stops at the outage, after the first part
    expect(outbox.size).toBe(1);
    await outbox.drain();
    await other;
    expect(outbox.size).toBe(0);
    expect(inserts).toEqual([
      `${ZONE_EVENTS_PER_STORE} events`,
      'other-tenant',
      `${ZONE_EVENTS_PER_STORE} events`, // refused: the database was away
      `${ZONE_EVENTS_PER_STORE} events`,
      '17 events',
    ]);
    const stored = await storage.execute<{ n: number; devices: number }>(
      "select count(*)::int as n, count(distinct device_id)::int as devices from zone_events where zone_id = 'fence-parts'",
    );
    expect(stored[0]).toEqual({ n: count, devices: count });
  });
});
