import { createVenue, squareCartesians } from '../testkit/cartography.js';
import { adminClient } from '../testkit/identity.js';
import { startTestGateway } from '../testkit/test-gateway.js';
import { summarise, type Figure, type Scenario } from './harness.js';

/** Building detail of a large venue: 5 floors, 2,000 POIs, 500 geofences (target: well under a second). */
export const buildingDetailScenario: Scenario = {
  name: 'building-detail',
  async run(): Promise<Figure[]> {
    const running = await startTestGateway({ LOG_LEVEL: 'silent' });
    try {
      const admin = await adminClient(running.client);
      const { building, floors } = await createVenue(admin, 'Bench venue');
      const allFloors = [...floors];
      for (let level = 2; level < 5; level++)
        allFloors.push((await admin.post('/api/v1/floors', { building_id: building.id, level })).body);
      const pois = Array.from({ length: 2000 }, (_, i) => ({
        building_id: building.id,
        name: `POI ${i}`,
        info: `<p>Point of interest number ${i}</p>`,
        position: { floor_id: allFloors[i % 5].id, cartesians: { x: (i * 7) % 120, y: (i * 13) % 80 } },
      }));
      for (let start = 0; start < pois.length; start += 500) await admin.post('/api/v1/pois_bulk', pois.slice(start, start + 500));
      for (let i = 0; i < 500; i++) {
        await admin.post('/api/v1/geofences', {
          name: `Zone ${i}`,
          building_id: building.id,
          floor_id: allFloors[i % 5].id,
          type: 'POLYGON',
          cartesians: squareCartesians((i * 3) % 110, (i * 5) % 70, 5),
        });
      }
      const samples: number[] = [];
      let bytes = 0;
      for (let i = 0; i < 25; i++) {
        const started = performance.now();
        const response = await admin.get(`/api/v1/buildings/${building.id}`);
        samples.push(performance.now() - started);
        bytes = response.text.length;
        if (response.body.indoor_pois.length !== 2000 || response.body.geofences.length !== 500) throw new Error('incomplete venue');
      }
      const stats = summarise(samples.slice(3)); // the first requests warm caches and the JIT
      return [
        { scenario: 'building-detail', metric: 'p50 latency', value: stats.p50, unit: 'ms', target: '< 1000 ms', met: stats.p50 < 1000 },
        { scenario: 'building-detail', metric: 'p95 latency', value: stats.p95, unit: 'ms', target: '< 1000 ms', met: stats.p95 < 1000 },
        { scenario: 'building-detail', metric: 'response size', value: bytes / 1024, unit: 'KiB' },
      ];
    } finally {
      await running.stop();
    }
  },
};
