import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_LOCAL_COORDINATE_METRES, parsePoseFast, poseSchema, timestampProblem } from '../../gateway/realtime/pose-schema.js';

/** Values near every boundary the schema draws, and of every JSON type, so both sides of each rule are tried. */
const number = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    1,
    -1,
    0.5,
    90,
    -90,
    90.0001,
    180,
    -180,
    180.5,
    MAX_LOCAL_COORDINATE_METRES,
    -MAX_LOCAL_COORDINATE_METRES,
    MAX_LOCAL_COORDINATE_METRES + 0.001,
    15_000,
    -15_000,
    1e20,
    -1.7e308,
    Number.MAX_SAFE_INTEGER,
    2 ** 60,
    NaN,
    Infinity,
  ),
  fc.double(),
  fc.integer(),
);
const text = fc.oneof(
  fc.constantFrom('', ' ', ' phone ', 'a\u0000b', 'half\ud800', 'x'.repeat(200), 'x'.repeat(201), '12', 'true'),
  fc.constantFrom(
    '2026-11-23T10:00:00Z',
    '2026-11-23T10:00:00.123+02:00',
    '2026-02-30T10:00:00Z',
    '2026-11-23T10:00:00',
    '2026-11-23T24:00:00Z',
    '2026-11-23T10:00:00+24:00',
    '2024-02-29T00:00:00-05:30',
  ),
  fc.constantFrom('6f1c2b9e-8a3d-4c5e-9f0a-1b2c3d4e5f60', '6f1c2b9e-8a3d-0c5e-9f0a-1b2c3d4e5f60', '00000000-0000-0000-0000-000000000000'),
  fc.string(),
);
const value = fc.oneof(number, text, fc.boolean(), fc.constant(null), fc.constant(undefined), fc.constant([]), fc.constant({}));
const fields = {
  device_id: fc.oneof(fc.constantFrom('phone-1', ' tag ', 7, -1, 2.5), text),
  timestamp: fc.oneof(fc.constantFrom(1_763_900_000_000, '2026-11-23T10:00:00.5+01:00', 0, -5, 1.5), number, text),
  building_id: fc.oneof(fc.constantFrom(1, 12, 0, -3, 2.5, '7'), value),
  floor_id: fc.oneof(fc.constantFrom(1, 2, 0, 2 ** 60), value),
  x: number,
  y: number,
  lat: number,
  lng: number,
  yaw: number,
  accuracy: number,
  user_id: text,
  danger: value,
  assistance_request: value,
  extra: value,
};
type Field = keyof typeof fields;
/** A valid indoor or outdoor pose with up to three fields replaced (or removed): mostly one step from valid. */
const pose = fc
  .tuple(
    fc.constantFrom<Record<string, unknown>>(
      { device_id: 'tag-1', timestamp: 1_763_900_000_000, building_id: 3, floor_id: 4, x: 12.5, y: -3 },
      { device_id: 'walker', timestamp: '2026-11-23T10:00:00Z', lat: 40.4, lng: -3.7, yaw: 1 },
    ),
    fc.array(
      fc
        .constantFrom(...(Object.keys(fields) as Field[]))
        .chain((key) => fc.tuple(fc.constant(key), fc.option(fields[key], { nil: undefined, freq: 6 }))),
      { maxLength: 3 },
    ),
  )
  .map(([base, changes]) => {
    const item: Record<string, unknown> = { ...base };
    for (const [key, replacement] of changes) {
      if (replacement === undefined) delete item[key];
      else item[key] = replacement;
    }
    return item;
  });

describe('pose validation', () => {
  it('the allocation-free fast path accepts only what the schema accepts, with the same result', () => {
    fc.assert(
      fc.property(pose, (item) => {
        const fast = parsePoseFast(item);
        if (fast === undefined) return;
        const parsed = poseSchema.safeParse(item);
        expect(parsed.success, JSON.stringify(item)).toBe(true);
        expect(fast).toEqual(parsed.data);
      }),
      { seed: 13, numRuns: 20_000 },
    );
  });

  it('takes the fast path for the ordinary indoor and outdoor poses apps send', () => {
    const indoor = { device_id: 'tag-1', timestamp: 1_763_900_000_000, building_id: 3, floor_id: 4, x: 12.5, y: -3, yaw: 1.5, accuracy: 2 };
    const outdoor = {
      device_id: 42,
      timestamp: '2026-11-23T10:00:00.123+02:00',
      lat: 40.4,
      lng: -3.7,
      user_id: '6f1c2b9e-8a3d-4c5e-9f0a-1b2c3d4e5f60',
      danger: true,
    };
    expect(parsePoseFast(indoor)).toEqual(poseSchema.parse(indoor));
    expect(parsePoseFast(outdoor)).toEqual(poseSchema.parse(outdoor));
    expect(parsePoseFast({ ...indoor, x: 1e20 })).toBeUndefined();
    expect(poseSchema.safeParse({ ...indoor, x: 1e20 }).success).toBe(false);
  });

  it('bounds timestamps to [receivedAt - max age, receivedAt + 5 min]', () => {
    const now = Date.UTC(2026, 10, 23);
    expect(timestampProblem(now, now, 1000)).toBeUndefined();
    expect(timestampProblem(now - 1000, now, 1000)).toBeUndefined();
    expect(timestampProblem(now - 1001, now, 1000)).toMatch(/POSITIONS_MAX_AGE_SECONDS/);
    expect(timestampProblem(now + 300_000, now, 1000)).toBeUndefined();
    expect(timestampProblem(now + 300_001, now, 1000)).toMatch(/future/);
  });
});
