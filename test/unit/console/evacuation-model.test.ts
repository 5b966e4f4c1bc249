import { describe, expect, it } from 'vitest';
import { MusterRoll, clock, missingByFloor, personLabel, type RollEntry } from '../../../console/src/evacuation-model.js';

const summary = {
  id: 'e1',
  building_id: 1,
  floor_ids: null,
  note: null,
  drill: true,
  active: true,
  started_at: '2026-01-01T10:00:00.000Z',
  started_by: { user_id: 'u0', email: 'a@b.c' },
  ended_at: null,
  ended_by: null,
};

const at = (seconds: number) => new Date(Date.parse('2026-01-01T10:00:00.000Z') + seconds * 1000).toISOString();

function entry(key: string, overrides: Partial<RollEntry> = {}): RollEntry {
  return {
    entry: key,
    user_id: key.startsWith('user:') ? key.slice(5) : null,
    device_ids: [`d-${key.slice(-1)}`],
    arrival: false,
    status: 'missing',
    status_at: at(0),
    assembly_point: null,
    marked_by: null,
    comment: null,
    last_position: { floor_id: 10, x: 1, y: 2, lat: 0, lng: 0, fix_at: at(-30) },
    seq: 1,
    ...overrides,
  };
}

describe('the evacuation roll in the console', () => {
  it('takes each entry by seq: a replayed or fetched older copy never undoes a newer change, but a newer fix is kept', () => {
    const roll = new MusterRoll(summary);
    roll.apply(entry('user:a', { seq: 5, status: 'safe', assembly_point: { id: 'p1', name: 'Lawn' } }));
    const older = entry('user:a', { seq: 2, last_position: { floor_id: 11, x: 9, y: 9, lat: 0, lng: 0, fix_at: at(60) } });
    expect(roll.apply(older)).toBe(true);
    expect(roll.get('user:a')).toMatchObject({ status: 'safe', seq: 5, last_position: { floor_id: 11, x: 9 } });
    expect(roll.apply(entry('user:a', { seq: 3 }))).toBe(false);
    expect(roll.maxSeq).toBe(5);
  });

  it('moves a missing person with a live position of any of their devices, only forwards in time', () => {
    const roll = new MusterRoll(summary);
    roll.apply(entry('user:b', { device_ids: ['tag-b', 'phone-b'] }));
    const moved = roll.position('phone-b', { floor_id: 12, x: 5, y: 6, lat: 0, lng: 0, fix_at: at(10) });
    expect(moved?.last_position).toMatchObject({ floor_id: 12, x: 5, y: 6 });
    expect(roll.position('tag-b', { floor_id: 10, x: 0, y: 0, lat: 0, lng: 0, fix_at: at(5) })).toBeUndefined();
    expect(roll.position('stranger', { floor_id: 10, x: 0, y: 0, lat: 0, lng: 0, fix_at: at(50) })).toBeUndefined();
  });

  it('counts the roll (safe either way, arrivals apart), the assembly points and the last accounted', () => {
    const roll = new MusterRoll(summary);
    roll.apply(entry('user:a', { status: 'safe', status_at: at(20), assembly_point: { id: 'p1', name: 'Lawn' } }));
    roll.apply(entry('user:b', { status: 'safe', status_at: at(30), assembly_point: { id: 'p1', name: 'Lawn' } }));
    roll.apply(entry('user:c', { status: 'safe_manual', status_at: at(40), comment: 'seen at the gate' }));
    roll.apply(entry('user:d'));
    roll.apply(entry('user:e', { status: 'left_site' }));
    roll.apply(entry('user:f', { arrival: true }));
    expect(roll.counts()).toEqual({ on_roll: 5, missing: 1, safe: 3, safe_manual: 1, left_site: 1, not_found: 0, arrivals: 1 });
    expect([...roll.pointCounts()]).toEqual([['p1', 2]]);
    expect(roll.recentlyAccounted(2).map((e) => e.entry)).toEqual(['user:c', 'user:b']);
    expect(roll.unaccounted().map((e) => e.entry)).toEqual(['user:d']);
  });

  it('orders the missing by floor level (no floor last), the longest unseen first within a floor', () => {
    const levels = new Map([
      [10, 1],
      [11, 0],
    ]);
    const fix = (floor_id: number | null, seconds: number) => ({ floor_id, x: 0, y: 0, lat: 0, lng: 0, fix_at: at(seconds) });
    const groups = missingByFloor(
      [
        entry('user:1', { last_position: fix(10, -5) }),
        entry('user:2', { last_position: null }),
        entry('user:3', { last_position: fix(11, -1) }),
        entry('user:4', { last_position: fix(10, -50) }),
        entry('user:5', { last_position: fix(11, -9) }),
      ],
      (id) => levels.get(id),
    );
    expect(groups.map((g) => [g.floorId, g.entries.map((e) => e.entry)])).toEqual([
      [11, ['user:5', 'user:3']],
      [10, ['user:4', 'user:1']],
      [null, ['user:2']],
    ]);
  });

  it('writes elapsed time as a clock and names people by name, device or short id', () => {
    expect(clock(0)).toBe('0:00');
    expect(clock(65_000)).toBe('1:05');
    expect(clock(3_729_000)).toBe('1:02:09');
    const names = new Map([['u1', 'Ana (nurse)']]);
    const name = (id: string) => names.get(id) ?? null;
    expect(personLabel({ entry: 'user:u1', user_id: 'u1' }, name)).toBe('Ana (nurse)');
    expect(personLabel({ entry: 'user:0123456789', user_id: '0123456789' }, name)).toBe('user 01234567');
    expect(personLabel({ entry: 'device:tag-7', user_id: null }, name)).toBe('tag-7');
  });
});
