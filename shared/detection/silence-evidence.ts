import type { StoredPlaceRow } from '../positions/position-record.js';

/**
 * What fixes that reached us late say about a DEADMAN raised for silence (issue 30, docs/event-time.md): the
 * device was silent to us, but its buffer shows where it was meanwhile. The alarm is not withdrawn (nobody could
 * see the person then); it carries this evidence, so the operator can close it knowing ("reported late: was moving").
 */

/** One fix that covers the silence, as the alarm lists it. */
export interface EvidenceFix extends StoredPlaceRow {
  /** Fix time (ISO). */
  at: string;
  /** How long after the fix it reached us. */
  delay_ms: number;
}

export interface SilenceEvidence {
  /** Fixes taken during the silence that reached us late. */
  count: number;
  /** Fix times of the first and the last of them (ISO). */
  first_at: string;
  last_at: string;
  /** They changed floor, or two of them lie further apart than the building's dead-man radius. */
  was_moving: boolean;
  /** The greatest distance between two of them on one floor, in metres (null without floor coordinates). */
  moved_m: number | null;
  /** At most `MAX_EVIDENCE_FIXES` of them, evenly spread over the silence, the first and the last included. */
  fixes: EvidenceFix[];
}

export const MAX_EVIDENCE_FIXES = 50;

/** The evidence of `fixes` (fix-time order, at least one); `radiusM`: the building's dead-man radius (0 when unset). */
export function silenceEvidence(fixes: readonly EvidenceFix[], radiusM: number): SilenceEvidence {
  let movedM: number | null = null;
  let changedFloor = false;
  const byFloor = new Map<number, EvidenceFix[]>();
  for (const fix of fixes) {
    if (fix.floor_id !== fixes[0]!.floor_id) changedFloor = true;
    if (fix.floor_id === null || fix.x === null || fix.y === null) continue;
    (byFloor.get(fix.floor_id) ?? byFloor.set(fix.floor_id, []).get(fix.floor_id)!).push(fix);
  }
  // Pairwise over what the alarm keeps of each floor: a walk out and back shows, and it stays bounded.
  for (const onFloor of byFloor.values()) {
    const kept = spread(onFloor, 4 * MAX_EVIDENCE_FIXES);
    movedM ??= 0;
    for (let i = 0; i < kept.length; i++)
      for (let j = i + 1; j < kept.length; j++) movedM = Math.max(movedM, Math.hypot(kept[i]!.x! - kept[j]!.x!, kept[i]!.y! - kept[j]!.y!));
  }
  return {
    count: fixes.length,
    first_at: fixes[0]!.at,
    last_at: fixes.at(-1)!.at,
    was_moving: changedFloor || (movedM !== null && movedM > radiusM),
    moved_m: movedM === null ? null : Math.round(movedM * 100) / 100,
    fixes: spread(fixes, MAX_EVIDENCE_FIXES),
  };
}

/** At most `max` of `items`, evenly spaced, the first and the last included. */
function spread<T>(items: readonly T[], max: number): T[] {
  if (items.length <= max) return [...items];
  return Array.from({ length: max }, (_, index) => items[Math.round((index * (items.length - 1)) / (max - 1))]!);
}
