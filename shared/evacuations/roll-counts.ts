import { z } from 'zod';

/**
 * How an evacuation's roll is counted: by the gateway's roll (gateway/evacuations/roll.ts) and by the evacuation
 * report the workers build (./evacuation-report.ts), so the two never disagree.
 */
export const ROLL_STATUSES = ['missing', 'safe', 'safe_manual', 'left_site', 'not_found'] as const;
export type RollStatus = (typeof ROLL_STATUSES)[number];

export const rollCountsSchema = z.object({
  on_roll: z.number().int(),
  missing: z.number().int(),
  safe: z.number().int(),
  safe_manual: z.number().int(),
  left_site: z.number().int(),
  not_found: z.number().int(),
  arrivals: z.number().int(),
});
export type RollCounts = z.infer<typeof rollCountsSchema>;

/** Counts of the roll; arrivals are counted apart and in no status. */
export function countRoll(entries: readonly { status: RollStatus; arrival: boolean }[]): RollCounts {
  const counts: RollCounts = { on_roll: 0, missing: 0, safe: 0, safe_manual: 0, left_site: 0, not_found: 0, arrivals: 0 };
  for (const entry of entries) {
    if (entry.arrival) {
      counts.arrivals++;
      continue;
    }
    counts.on_roll++;
    counts[entry.status]++;
  }
  return counts;
}
