import { expect } from 'vitest';
import type { TestClient } from './http-client.js';

/** A rotated building (0.7 rad, 120 m x 80 m in Madrid) with two floors: the fixture most cartography tests use. */
export async function createVenue(client: TestClient, name = 'Venue') {
  const building = await client.post('/api/v1/buildings', {
    name,
    description: 'Calle Mayor 1',
    location: { lat: 40.4168, lng: -3.7038 },
    dimensions: { width: 120, length: 80 },
    rotation: 0.7,
    custom_fields: [{ key: 'wing', value: 'north' }],
  });
  expect(building.status, building.text).toBe(201);
  const ground = await client.post('/api/v1/floors', { building_id: building.body.id, level: 0, name: 'Ground' });
  const first = await client.post('/api/v1/floors', { building_id: building.body.id, level: 1, level_height: 4.5, name: 'First' });
  expect(ground.status, ground.text).toBe(201);
  expect(first.status, first.text).toBe(201);
  return { building: building.body, floors: [ground.body, first.body] as const };
}

/** A square geofence of `size` metres with its lower-left corner at (x, y). */
export const squareCartesians = (x: number, y: number, size: number): [number, number][] => [
  [x, y],
  [x + size, y],
  [x + size, y + size],
  [x, y + size],
  [x, y],
];
