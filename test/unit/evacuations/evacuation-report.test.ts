import { describe, expect, it } from 'vitest';
import {
  buildEvacuationReport,
  evacuationReportCsv,
  evacuationReportSchema,
  type ReportedEntry,
  type ReportedEvacuation,
} from '../../../shared/evacuations/evacuation-report.js';

const T0 = Date.parse('2026-11-27T10:00:00.000Z');
const warden = { user_id: 'w', email: 'warden@site.example' };
const evacuation: ReportedEvacuation = {
  id: '00000000-0000-4000-8000-000000000001',
  buildingId: 7,
  floorIds: null,
  note: 'Fire alarm',
  drill: true,
  startedAt: T0,
  startedBy: warden,
  endedAt: T0 + 600_000,
  endedBy: warden,
};
const A = { id: 'a', name: 'Car park A' };
const B = { id: 'b', name: 'Lawn B' };
let seq = 0;
const entry = (key: string, status: ReportedEntry['status'], afterS: number, extra: Partial<ReportedEntry> = {}): ReportedEntry => ({
  personKey: key,
  userId: null,
  deviceIds: [key],
  arrival: false,
  status,
  statusAt: T0 + afterS * 1000,
  point: null,
  markedBy: null,
  comment: null,
  fix: null,
  seq: ++seq,
  ...extra,
});

describe('the evacuation report (pure)', () => {
  // Ten on the roll: one outside already, six reach points, one marked by hand, two never found; one responder.
  const entries = [
    entry('p1', 'safe', 30, { point: A }),
    entry('p2', 'safe', 10, { point: B }),
    entry('p3', 'left_site', 0),
    entry('p4', 'safe', 50, { point: A }),
    entry('p5', 'safe', 40, { point: A }),
    entry('p6', 'safe_manual', 45, { markedBy: warden, comment: 'Seen at the gate' }),
    entry('p7', 'safe', 20, { point: B }),
    entry('p8', 'safe', 70, { point: A }),
    entry('p9', 'not_found', 600, { fix: { floorId: 3, x: 1.5, y: 2, at: T0 - 5000 } }),
    entry('p10', 'not_found', 600),
    entry('r1', 'missing', 25, { arrival: true }),
  ];
  const report = buildEvacuationReport(evacuation, entries, [A, B, { id: 'c', name: 'Annex' }], T0 + 999_999);

  it('counts the roll without its arrivals, and gives the time to 50%, 90% and 100% accounted', () => {
    expect(evacuationReportSchema.parse(report)).toEqual(report);
    expect(report.counts).toEqual({
      on_roll: 10,
      accounted: 8,
      safe: 6,
      safe_manual: 1,
      left_site: 1,
      missing: 0,
      not_found: 2,
      arrivals: 1,
    });
    expect(report.duration_s).toBe(600);
    // In order: p3 0, p2 10, p7 20, p1 30, p5 40 (the 5th: 50%), p6 45, p4 50, p8 70; 9 needed for 90%, never reached.
    expect(report.milestones).toEqual([
      { percent: 50, accounted: 5, reached_at: new Date(T0 + 40_000).toISOString(), after_s: 40 },
      { percent: 90, accounted: 9, reached_at: null, after_s: null },
      { percent: 100, accounted: 10, reached_at: null, after_s: null },
    ]);
    expect(report.last_accounted).toMatchObject({ entry: 'p8', after_s: 70, event: 'safe', assembly_point: A, accounted: 8 });
    expect(report.not_accounted).toEqual([
      {
        entry: 'p10',
        user_id: null,
        device_ids: ['p10'],
        status: 'not_found',
        last_position: null,
      },
      {
        entry: 'p9',
        user_id: null,
        device_ids: ['p9'],
        status: 'not_found',
        last_position: { floor_id: 3, x: 1.5, y: 2, fix_at: new Date(T0 - 5000).toISOString() },
      },
    ]);
  });

  it('gives each assembly point its arrivals, first and last, also a point nobody reached', () => {
    expect(report.assembly_points).toEqual([
      { id: 'c', name: 'Annex', arrivals: 0, first_at: null, first_after_s: null, last_at: null, last_after_s: null },
      expect.objectContaining({ id: 'a', arrivals: 4, first_after_s: 30, last_after_s: 70 }),
      expect.objectContaining({ id: 'b', arrivals: 2, first_after_s: 10, last_after_s: 20 }),
    ]);
    expect(report.marked_by_hand).toEqual([
      {
        entry: 'p6',
        user_id: null,
        device_ids: ['p6'],
        at: new Date(T0 + 45_000).toISOString(),
        after_s: 45,
        marked_by: warden,
        comment: 'Seen at the gate',
      },
    ]);
  });

  it('lays the timeline out in time, each row with the share accounted once it happened, and the milestone it brought', () => {
    const events = report.timeline.map((row) => [row.event, row.entry, row.after_s, row.accounted, row.milestone_pct]);
    expect(events).toEqual([
      ['started', null, 0, 0, null],
      ['left_site', 'p3', 0, 1, null],
      ['safe', 'p2', 10, 2, null],
      ['safe', 'p7', 20, 3, null],
      ['arrival', 'r1', 25, 3, null],
      ['safe', 'p1', 30, 4, null],
      ['safe', 'p5', 40, 5, 50],
      ['safe_manual', 'p6', 45, 6, null],
      ['safe', 'p4', 50, 7, null],
      ['safe', 'p8', 70, 8, null],
      ['not_found', 'p9', 600, 8, null],
      ['not_found', 'p10', 600, 8, null],
      ['ended', null, 600, 8, null],
    ]);
    expect(report.timeline[0]).toMatchObject({ comment: 'Fire alarm', marked_by: warden });
  });

  it('puts 50, 90 and 100 on one row when one person brings all three (a roll of one), and none on an empty roll', () => {
    const one = buildEvacuationReport(evacuation, [entry('solo', 'safe', 12, { point: A })], [A], T0);
    expect(one.milestones.map((m) => m.after_s)).toEqual([12, 12, 12]);
    expect(one.timeline[1]!.milestone_pct).toBe(100);
    const none = buildEvacuationReport({ ...evacuation, endedAt: null, endedBy: null }, [], [], T0 + 3000);
    expect(none.milestones.map((m) => m.reached_at)).toEqual([null, null, null]);
    expect(none.duration_s).toBe(3);
    expect(none.evacuation.active).toBe(true);
    expect(none.timeline.map((row) => row.event)).toEqual(['started']);
  });

  it('writes the timeline as CSV, one row per event, the warden by address and the devices space-separated', () => {
    const lines = evacuationReportCsv(report).trimEnd().split('\r\n');
    expect(lines[0]).toBe(
      'at,after_s,event,entry,user_id,device_ids,assembly_point_id,assembly_point_name,marked_by,comment,accounted,accounted_pct,milestone_pct',
    );
    expect(lines).toHaveLength(report.timeline.length + 1);
    expect(lines[7]).toBe(`${new Date(T0 + 40_000).toISOString()},40,safe,p5,,p5,a,Car park A,,,5,50,50`);
    expect(lines[8]).toBe(`${new Date(T0 + 45_000).toISOString()},45,safe_manual,p6,,p6,,,warden@site.example,Seen at the gate,6,60,`);
  });
});
