import { z } from 'zod';
import { latitude, longitude } from '../cartography/placement.js';
import { pgTextProblem } from '../http/pg-text.js';

/** Fixes more than this far in the future are refused: the device clock is wrong, and history would lie. */
export const MAX_CLOCK_SKEW_MS = 5 * 60 * 1000;

/**
 * How far (metres, along x and along y) an indoor fix may lie from its building's origin. Floors carry no
 * extent of their own, and a campus plan may reach well past the building outline, so the rule is the bound
 * no indoor positioning system could honestly exceed: 10 km. It keeps every derived lat/lng finite and sane.
 */
export const MAX_LOCAL_COORDINATE_METRES = 10_000;

/** Default of POSITIONS_MAX_AGE_SECONDS: apps upload what they buffered offline, up to a week late. */
export const DEFAULT_POSITIONS_MAX_AGE_MS = 7 * 24 * 3600 * 1000;

const localCoordinate = z
  .number()
  .min(-MAX_LOCAL_COORDINATE_METRES, `must be within ${MAX_LOCAL_COORDINATE_METRES} m of the building origin`)
  .max(MAX_LOCAL_COORDINATE_METRES, `must be within ${MAX_LOCAL_COORDINATE_METRES} m of the building origin`);

/** Characters PostgreSQL refuses in text (also refused at the HTTP boundary; this keeps WebSocket uploads honest). */
const storableText = (value: string) => pgTextProblem(value) === undefined;

/**
 * One pose of an UploadPosesForm. Indoor: `building_id`, `floor_id`, `x`, `y` (metres); outdoor: `lat`, `lng`
 * (optional `building_id`). `timestamp` is ISO 8601 with an offset, or epoch milliseconds.
 */
export const poseSchema = z
  .object({
    device_id: z
      .union([z.string().trim().min(1).max(200).refine(storableText, 'must not contain NUL or an unpaired UTF-16 surrogate'), z.number().int().nonnegative()])
      .transform(String)
      .describe('The identifier the app uses'),
    timestamp: z
      .union([z.number().int().positive().describe('epoch milliseconds'), z.iso.datetime({ offset: true, message: 'ISO 8601 with an offset, or epoch milliseconds' })])
      .transform((value) => (typeof value === 'number' ? value : Date.parse(value))),
    building_id: z.coerce.number().int().positive().optional(),
    floor_id: z.coerce.number().int().positive().optional(),
    x: localCoordinate.optional().describe('Metres from the building origin, at most 10 km either way'),
    y: localCoordinate.optional().describe('Metres from the building origin, at most 10 km either way'),
    lat: latitude.optional(),
    lng: longitude.optional(),
    yaw: z.number().finite().default(0).describe('Radians'),
    accuracy: z.number().finite().min(0).optional().describe('Metres'),
    user_id: z.uuid().optional(),
    danger: z.boolean().optional().describe('Raises a DANGER alarm (alarm button)'),
    assistance_request: z.boolean().optional().describe('Raises an ASSISTANCE_REQUEST alarm'),
  })
  .superRefine((pose, context) => {
    const indoor = pose.floor_id !== undefined || pose.x !== undefined || pose.y !== undefined;
    if (indoor) {
      for (const field of ['building_id', 'floor_id', 'x', 'y'] as const) {
        if (pose[field] === undefined) context.addIssue({ code: 'custom', path: [field], message: 'an indoor fix needs building_id, floor_id, x and y' });
      }
    } else if (pose.lat === undefined || pose.lng === undefined) {
      context.addIssue({ code: 'custom', path: [pose.lat === undefined ? 'lat' : 'lng'], message: 'give an indoor fix (building_id, floor_id, x, y) or an outdoor one (lat, lng)' });
    }
    // The timestamp's window ([now - POSITIONS_MAX_AGE_SECONDS, now + 5 min]) is checked by the pipeline, against
    // the batch's receipt time (see timestampProblem).
  });

/** Why a fix's time is outside what the gateway accepts, or undefined when it is inside. */
export function timestampProblem(timestamp: number, receivedAt: number, maxAgeMs: number): string | undefined {
  if (timestamp > receivedAt + MAX_CLOCK_SKEW_MS) return 'more than 5 minutes in the future';
  if (timestamp < receivedAt - maxAgeMs) return `older than POSITIONS_MAX_AGE_SECONDS (${Math.round(maxAgeMs / 1000)} s)`;
  return undefined;
}

export type Pose = z.infer<typeof poseSchema>;

export const uploadPosesSchema = z.object({
  poses: z.array(z.unknown()).min(1, 'at least one pose').max(10_000, 'at most 10,000 poses per upload'),
});
