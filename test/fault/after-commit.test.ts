import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * A write answers success only when it committed, and an error only when it did not: a step after the commit
 * (the bus announcing the change) that fails must not turn a stored write into a 500 the client would retry.
 */
describe(`a failure after the commit (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'After-commit venue');
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('answers success for committed writes whose announcement on the bus fails', async () => {
    const { bus, storage } = running.gateway.services;
    const publish = bus.publish.bind(bus);
    bus.publish = async () => {
      throw new Error('bus down (injected)');
    };
    try {
      const created = await admin.post('/api/v1/geofences', {
        name: 'After commit',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'CIRCLE',
        cartesians: [[5, 5]],
        radius: 2,
      });
      expect(created.status, created.text).toBe(201);
      const device = await admin.post('/api/v1/devices', { identifier: `after-commit-${Date.now()}`, name: 'Phone' });
      expect(device.status, device.text).toBe(201);
      const settings = await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: 60 });
      expect(settings.status, settings.text).toBe(200);
      const rows = await storage.execute('select 1 from geofences where id = ?', [created.body.id]);
      expect(rows).toHaveLength(1);
    } finally {
      bus.publish = publish;
    }
  });
});
