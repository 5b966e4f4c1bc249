import { z } from 'zod';
import type { Actor, EvacuationRow, StoredEntry } from './evacuation-store.js';
import { ROLL_STATUSES, rollCountsSchema } from '../../shared/evacuations/roll-counts.js';

const iso = (ms: number | Date) => new Date(ms).toISOString();

const actorSchema = z.object({ user_id: z.string(), email: z.string() });

export const rollEntrySchema = z.object({
  entry: z
    .string()
    .describe(
      'The entry id: `user:{user id}`, `device:{identifier}` for a device nobody is assigned, or `erased:{n}` once the person was erased (docs/privacy.md)',
    ),
  user_id: z.string().nullable(),
  device_ids: z.array(z.string()),
  arrival: z.boolean().describe('Came into the building after the declaration (a responder): listed apart, never missing'),
  status: z.enum(ROLL_STATUSES),
  status_at: z.string(),
  assembly_point: z.object({ id: z.string(), name: z.string() }).nullable().describe('Where the person was accounted (status safe)'),
  marked_by: actorSchema.nullable().describe('The warden who marked the person safe by hand (status safe_manual)'),
  comment: z.string().nullable(),
  last_position: z
    .object({
      floor_id: z.number().int().nullable(),
      x: z.number().nullable(),
      y: z.number().nullable(),
      lat: z.number(),
      lng: z.number(),
      fix_at: z.string(),
    })
    .nullable()
    .describe("The last known fix of any of the person's devices"),
  seq: z.number().int().describe('Bumped at each change of the entry; a `since_seq` subscription resumes after it'),
});
export type PresentedEntry = z.infer<typeof rollEntrySchema>;

export const evacuationSummarySchema = z.object({
  id: z.uuid(),
  building_id: z.number().int(),
  floor_ids: z.array(z.number().int()).nullable().describe('The declared scope; null: every floor'),
  note: z.string().nullable(),
  drill: z.boolean(),
  active: z.boolean(),
  started_at: z.string(),
  started_by: actorSchema,
  ended_at: z.string().nullable(),
  ended_by: actorSchema.nullable(),
});

export const evacuationSchema = evacuationSummarySchema.extend({
  counts: rollCountsSchema,
  missing: z.array(rollEntrySchema).describe('Still missing, by floor (lowest level first), each with the last known place and fix time'),
  roll: z.array(rollEntrySchema).describe('Everyone on the roll at declaration, by entry'),
  arrivals: z.array(rollEntrySchema).describe('People who came into the building during the evacuation'),
});

export const presentActor = (actor: Actor | null) => (actor ? { user_id: actor.user_id, email: actor.email } : null);

export function presentSummary(evacuation: EvacuationRow): z.infer<typeof evacuationSummarySchema> {
  return {
    id: evacuation.id,
    building_id: evacuation.buildingId,
    floor_ids: evacuation.floorIds,
    note: evacuation.note,
    drill: evacuation.drill,
    active: evacuation.endedAt === null,
    started_at: iso(evacuation.startedAt),
    started_by: presentActor(evacuation.startedBy)!,
    ended_at: evacuation.endedAt ? iso(evacuation.endedAt) : null,
    ended_by: presentActor(evacuation.endedBy),
  };
}

export function presentEntry(entry: StoredEntry): PresentedEntry {
  const fix = entry.fix;
  return {
    entry: entry.personKey,
    user_id: entry.userId,
    device_ids: entry.deviceIds,
    arrival: entry.arrival,
    status: entry.status,
    status_at: iso(entry.statusAt),
    assembly_point: entry.pointId ? { id: entry.pointId, name: entry.pointName ?? '' } : null,
    marked_by: presentActor(entry.markedBy),
    comment: entry.comment,
    last_position: fix ? { floor_id: fix.floorId, x: fix.x, y: fix.y, lat: fix.lat, lng: fix.lng, fix_at: iso(fix.at) } : null,
    seq: entry.seq,
  };
}
