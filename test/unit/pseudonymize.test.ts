import { describe, expect, it } from 'vitest';
import { pseudonymizeRows } from '../../shared/reports/pseudonymize.js';
import { REPORT_COLUMNS } from '../../shared/reports/report-columns.js';

const KEY = Buffer.alloc(32, 7);

describe('pseudonymous reports', () => {
  it('replaces user and device ids with pseudonyms stable within a report and different under another key', () => {
    const meta = REPORT_COLUMNS.raw_data;
    const row = (device: string, user: string | null) => ['2026-01-01T00:00:00Z', device, user, 1, 1, true, 1, 2, 40, -3, 0, null];
    const rows = [row('phone-1', 'user-a'), row('phone-1', 'user-a'), row('phone-2', null)];
    const out = pseudonymizeRows('raw_data', { meta, rows }, 5, KEY);
    expect(out).toHaveLength(3);
    expect(JSON.stringify(out)).not.toMatch(/phone-|user-a/);
    expect(out[0]![1]).toBe(out[1]![1]);
    expect(out[0]![2]).toBe(out[1]![2]);
    expect(out[0]![1]).not.toBe(out[2]![1]);
    expect(out[0]![1]).toMatch(/^d-[0-9a-f]{20}$/);
    expect(out[0]![2]).toMatch(/^u-[0-9a-f]{20}$/);
    expect(out[2]![2]).toBeNull();
    // Not a report's column kept: the rest of the row is untouched.
    expect(out[0]!.slice(3)).toEqual(rows[0]!.slice(3));
    const other = pseudonymizeRows('raw_data', { meta, rows }, 5, Buffer.alloc(32, 8));
    expect(other[0]![1]).not.toBe(out[0]![1]);
    // A fresh key each time when none is given: two reports cannot be joined on a pseudonym.
    expect(pseudonymizeRows('raw_data', { meta, rows }, 5)[0]![1]).not.toBe(pseudonymizeRows('raw_data', { meta, rows }, 5)[0]![1]);
  });

  it('drops place cells of fewer than k people: visitors, heatmap, positioning_time (its people counts)', () => {
    expect(
      pseudonymizeRows(
        'visitors',
        {
          meta: REPORT_COLUMNS.visitors,
          rows: [
            ['2026-01-01', 5, 6, 100],
            ['2026-01-02', 4, 9, 100],
          ],
        },
        5,
        KEY,
      ),
    ).toEqual([['2026-01-01', 5, 6, 100]]);
    expect(
      pseudonymizeRows(
        'heatmap',
        {
          meta: REPORT_COLUMNS.heatmap,
          rows: [
            ['a', 1, 2, 1, 10],
            ['b', 1, 2, 7, 10],
          ],
        },
        3,
        KEY,
      ).map((r) => r[0]),
    ).toEqual(['b']);
    const positioning = [
      ['Monday', 6, 6, 60, 1, 10, 10, 10, 20],
      ['Tuesday', 6, 6, 60, 1, 10, 10, 10, 20],
    ];
    // Six devices on Monday, but three people (two phones each): under k.
    expect(
      pseudonymizeRows('positioning_time', { meta: REPORT_COLUMNS.positioning_time, rows: positioning, people: [3, 6] }, 5, KEY).map(
        (r) => r[0],
      ),
    ).toEqual(['Tuesday']);
  });

  it('keeps or drops a geofence stay cell (a fence in a period) whole, counting people, not rows', () => {
    const meta = REPORT_COLUMNS.geofencing_stay_time;
    const stay = (group: string, fence: string, device: string, user: string | null) => [group, device, user, fence, 'F', 1, 10, 't', 't'];
    const rows = [
      stay('d1', 'f1', 'p1', 'u1'),
      stay('d1', 'f1', 'p2', 'u1'), // the same person's second phone
      stay('d1', 'f1', 'p3', 'u2'),
      stay('d1', 'f2', 'p4', null),
      stay('d1', 'f2', 'p5', null),
      stay('d1', 'f2', 'p6', 'u3'),
      stay('d2', 'f1', 'p1', 'u1'),
    ];
    const out = pseudonymizeRows('geofencing_stay_time', { meta, rows }, 3, KEY);
    expect(out.map((r) => `${r[0]}/${r[3]}`)).toEqual(['d1/f2', 'd1/f2', 'd1/f2']);
    expect(JSON.stringify(out)).not.toMatch(/"p\d"|"u\d"/);
  });
});
