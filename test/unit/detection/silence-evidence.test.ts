import { describe, expect, it } from 'vitest';
import { MAX_EVIDENCE_FIXES, silenceEvidence, type EvidenceFix } from '../../../shared/detection/silence-evidence.js';

const fix = (seconds: number, x: number | null, y: number | null, floorId: number | null = 1): EvidenceFix => ({
  at: new Date(seconds * 1000).toISOString(),
  building_id: 1,
  floor_id: floorId,
  x,
  y,
  lat: 0,
  lng: 0,
  delay_ms: 60_000,
});

describe('silence evidence', () => {
  it('counts the fixes, dates the first and last, and measures the greatest distance on a floor', () => {
    const evidence = silenceEvidence([fix(1, 0, 0), fix(2, 3, 4), fix(3, 0, 1)], 2);
    expect(evidence).toMatchObject({ count: 3, first_at: fix(1, 0, 0).at, last_at: fix(3, 0, 0).at, moved_m: 5, was_moving: true });
  });

  it('is not moving within the dead-man radius, and is on a change of floor', () => {
    expect(silenceEvidence([fix(1, 0, 0), fix(2, 1, 1)], 2).was_moving).toBe(false);
    expect(silenceEvidence([fix(1, 0, 0), fix(2, 0, 0, 2)], 2)).toMatchObject({ was_moving: true, moved_m: 0 });
  });

  it('sees a walk out and back (the greatest distance between any two, not from the first)', () => {
    expect(silenceEvidence([fix(1, 0, 0), fix(2, 10, 0), fix(3, 0, 0)], 2).moved_m).toBe(10);
  });

  it('has no distance without floor coordinates', () => {
    expect(silenceEvidence([fix(1, null, null, null), fix(2, null, null, null)], 0)).toMatchObject({ moved_m: null, was_moving: false });
  });

  it('keeps at most MAX_EVIDENCE_FIXES, evenly spread, the first and the last included', () => {
    const many = Array.from({ length: 1000 }, (_, index) => fix(index, index, 0));
    const evidence = silenceEvidence(many, 0);
    expect(evidence.count).toBe(1000);
    expect(evidence.fixes).toHaveLength(MAX_EVIDENCE_FIXES);
    expect(evidence.fixes[0]).toEqual(many[0]);
    expect(evidence.fixes.at(-1)).toEqual(many.at(-1));
    expect(evidence.moved_m).toBe(999);
  });
});
