import { describe, expect, it } from 'vitest';
import { countRoll } from '../../../shared/evacuations/roll-counts.js';
import {
  musterPointAt,
  orderMissing,
  rollAtDeclaration,
  type Fix,
  type MusterPoint,
  type Presence,
} from '../../../gateway/evacuations/roll.js';

const T0 = Date.parse('2026-11-27T10:00:00Z');
const B = 7;
const fix = (deviceId: string, extra: Partial<Fix> = {}): Fix => ({
  deviceId,
  userId: null,
  buildingId: B,
  floorId: 1,
  x: 10,
  y: 10,
  lat: 40,
  lng: -3,
  at: T0 - 60_000,
  ...extra,
});
const yard: MusterPoint = {
  id: 'yard',
  name: 'Yard',
  floorId: 1,
  type: 'POLYGON',
  cartesians: [
    [100, 0],
    [110, 0],
    [110, 10],
    [100, 10],
    [100, 0],
  ],
  radius: null,
};
const lawn: MusterPoint = { id: 'lawn', name: 'Lawn', floorId: 1, type: 'CIRCLE', cartesians: [[-20, 0]], radius: 5 };

const presence = (recent: Fix[], latest: Fix[], extra: Partial<Presence> = {}): Presence => ({
  buildingId: B,
  recentInside: new Map(recent.map((f) => [f.deviceId, f])),
  latest: new Map(latest.map((f) => [f.deviceId, f])),
  floorIds: null,
  points: [yard, lawn],
  // Outdoor fixes in these tests map 1e-4 degrees of longitude to one metre east, from lng 0.
  toCartesian: (f) => [f.lng * 1e4, f.lat * 1e4],
  now: T0,
  ...extra,
});

describe('rollAtDeclaration', () => {
  it('takes devices seen inside within the window, and those whose last fix was inside however old', () => {
    const seen = fix('seen');
    const old = fix('old', { at: T0 - 3 * 3600_000 });
    const goneLongAgo = fix('gone', { at: T0 - 3 * 3600_000 });
    const roll = rollAtDeclaration(
      presence([seen], [seen, old, { ...goneLongAgo, buildingId: null, floorId: null, x: null, y: null, lat: 0.05, lng: 0.05 }]),
    );
    expect(roll.map((entry) => entry.personKey)).toEqual(['device:old', 'device:seen']);
    expect(roll.every((entry) => entry.status === 'missing' && entry.statusAt === T0)).toBe(true);
  });

  it('lists a person once, with all their devices and the newest fix of any', () => {
    const phone = fix('phone', { userId: 'u1', at: T0 - 5000, x: 3 });
    const badge = fix('badge', { userId: 'u1', at: T0 - 1000, x: 4 });
    const [entry, ...rest] = rollAtDeclaration(presence([phone, badge], [phone, badge]));
    expect(rest).toEqual([]);
    expect(entry).toMatchObject({ personKey: 'user:u1', userId: 'u1', deviceIds: ['badge', 'phone'], fix: { deviceId: 'badge', x: 4 } });
  });

  it('counts someone already in an assembly point as safe, and someone seen inside who has since left as left_site', () => {
    const atYard = fix('at-yard', { x: 105, y: 5 });
    const onLawnOutdoors = { ...fix('on-lawn'), buildingId: null, floorId: null, x: null, y: null, lng: -0.002, lat: 0.0001 };
    const left = { ...fix('left'), buildingId: null, floorId: null, x: null, y: null, lng: 0.05, lat: 0.05 };
    const roll = rollAtDeclaration(presence([atYard, fix('on-lawn'), fix('left')], [atYard, onLawnOutdoors, left]));
    expect(roll.map((entry) => [entry.personKey, entry.status, entry.pointName])).toEqual([
      ['device:at-yard', 'safe', 'Yard'],
      ['device:left', 'left_site', null],
      ['device:on-lawn', 'safe', 'Lawn'],
    ]);
  });

  it('keeps to the declared floors, by where each was in the building', () => {
    const upstairs = fix('up', { floorId: 2 });
    const downstairs = fix('down', { floorId: 1 });
    const roll = rollAtDeclaration(presence([upstairs, downstairs], [upstairs, downstairs], { floorIds: new Set([2]) }));
    expect(roll.map((entry) => entry.personKey)).toEqual(['device:up']);
  });
});

describe('musterPointAt', () => {
  it("needs the point's floor for a fix on a floor, and takes an outdoor fix on any floor", () => {
    const toCartesian = () => [105, 5] as const;
    expect(musterPointAt([yard], fix('a', { x: 105, y: 5, floorId: 2 }), toCartesian)).toBeUndefined();
    expect(musterPointAt([yard], fix('a', { x: 105, y: 5 }), toCartesian)?.id).toBe('yard');
    expect(musterPointAt([yard], fix('a', { x: null, y: null, floorId: null }), toCartesian)?.id).toBe('yard');
    expect(musterPointAt([lawn], fix('a', { x: -20, y: 5.5 }), toCartesian)).toBeUndefined();
    expect(musterPointAt([lawn], fix('a', { x: -20, y: 4.5 }), toCartesian)?.id).toBe('lawn');
  });
});

describe('countRoll and orderMissing', () => {
  it('counts arrivals apart from the statuses of those on the roll', () => {
    const counts = countRoll([
      { status: 'missing', arrival: false },
      { status: 'safe', arrival: false },
      { status: 'safe_manual', arrival: false },
      { status: 'missing', arrival: true },
    ]);
    expect(counts).toEqual({ on_roll: 3, missing: 1, safe: 1, safe_manual: 1, left_site: 0, not_found: 0, arrivals: 1 });
  });

  it('orders the missing by floor level, then by the age of their fix; no floor last', () => {
    const levels = new Map([
      [10, 2],
      [11, 0],
      [12, 1],
    ]);
    const missing = [
      { id: 'top', fix: fix('top', { floorId: 10 }) },
      { id: 'outside', fix: fix('outside', { floorId: null }) },
      { id: 'ground-new', fix: fix('ground-new', { floorId: 11, at: T0 - 1000 }) },
      { id: 'ground-old', fix: fix('ground-old', { floorId: 11, at: T0 - 9000 }) },
      { id: 'middle', fix: fix('middle', { floorId: 12 }) },
    ];
    expect(orderMissing(missing, (floorId) => levels.get(floorId)).map((entry) => entry.id)).toEqual([
      'ground-old',
      'ground-new',
      'middle',
      'top',
      'outside',
    ]);
  });
});
