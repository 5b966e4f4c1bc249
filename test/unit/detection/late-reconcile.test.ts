import { describe, expect, it } from 'vitest';
import type { ZoneEventRecord } from '../../../gateway/detection/detections.js';
import { reconcile } from '../../../gateway/detection/late-detection.js';

const event = (type: 'enter' | 'exit', zoneId: string, at: number): ZoneEventRecord => ({
  organizationId: 'org',
  buildingId: 1,
  floorId: 1,
  zoneKind: 'geofence',
  zoneId,
  zoneName: zoneId,
  deviceId: 'd',
  userId: null,
  type,
  at,
  firedAt: at,
});
const row = (id: string, type: 'enter' | 'exit', zoneId: string, at: number) => ({
  id,
  zone_kind: 'geofence',
  zone_id: zoneId,
  type,
  at_ms: at,
});

describe('late path: the replay against the stored events', () => {
  it('adds what is missing, keeps what is stored, and supersedes the contradicted with the nearest correction of its kind', () => {
    const { added, superseded } = reconcile(
      [event('exit', 'a', 10), event('enter', 'b', 20), event('exit', 'b', 40), event('exit', 'a', 45)],
      [row('7', 'exit', 'b', 40), row('8', 'exit', 'a', 50)],
    );
    expect(added.map((e) => [e.type, e.zoneId, e.at, e.supersedes ?? null])).toEqual([
      ['exit', 'a', 10, null],
      ['enter', 'b', 20, null],
      ['exit', 'a', 45, '8'],
    ]);
    expect(superseded).toEqual(['8']);
  });

  it('changes nothing when the replay finds exactly what is stored, repeats included', () => {
    const { added, superseded } = reconcile(
      [event('enter', 'a', 10), event('enter', 'a', 10)],
      [row('1', 'enter', 'a', 10), row('2', 'enter', 'a', 10)],
    );
    expect(added).toEqual([]);
    expect(superseded).toEqual([]);
  });

  it('supersedes a stored event the replay does not find, even with no correction to name it', () => {
    expect(reconcile([], [row('3', 'exit', 'a', 50)])).toEqual({ added: [], superseded: ['3'] });
  });
});
