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
      .union([
        z.string().trim().min(1).max(200).refine(storableText, 'must not contain NUL or an unpaired UTF-16 surrogate'),
        z.number().int().nonnegative(),
      ])
      .transform(String)
      .describe('The identifier the app uses'),
    timestamp: z
      .union([
        z.number().int().positive().describe('epoch milliseconds'),
        z.iso.datetime({ offset: true, message: 'ISO 8601 with an offset, or epoch milliseconds' }),
      ])
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
        if (pose[field] === undefined)
          context.addIssue({ code: 'custom', path: [field], message: 'an indoor fix needs building_id, floor_id, x and y' });
      }
    } else if (pose.lat === undefined || pose.lng === undefined) {
      context.addIssue({
        code: 'custom',
        path: [pose.lat === undefined ? 'lat' : 'lng'],
        message: 'give an indoor fix (building_id, floor_id, x, y) or an outdoor one (lat, lng)',
      });
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

const isoWithOffset = z.regexes.datetime({ offset: true, local: false, precision: undefined } as never);
const uuidPattern = z.regexes.uuid();
const isSafeInt = Number.isSafeInteger;
const optionalNumberIn = (value: unknown, min: number, max: number) =>
  value === undefined || (typeof value === 'number' && value >= min && value <= max);

/**
 * `poseSchema`'s answer for the common, well-formed pose, without zod's per-field allocations (an upload can
 * carry 10,000 poses; issue 15). Returns undefined for anything it is not sure of (strings for numbers, a
 * missing field, any bad value): `poseSchema` then decides and explains. Whatever it accepts, `poseSchema`
 * accepts with the same result (absent fields read as undefined either way); a property test compares the two
 * on generated input.
 */
export function parsePoseFast(item: unknown): Pose | undefined {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return undefined;
  const { device_id, timestamp, building_id, floor_id, x, y, lat, lng, yaw, accuracy, user_id, danger, assistance_request } =
    item as Record<string, unknown>;
  let deviceId: string;
  if (typeof device_id === 'string') {
    deviceId = device_id.trim();
    if (deviceId.length === 0 || deviceId.length > 200 || pgTextProblem(deviceId) !== undefined) return undefined;
  } else if (typeof device_id === 'number' && isSafeInt(device_id) && device_id >= 0) deviceId = String(device_id);
  else return undefined;
  let time: number;
  if (typeof timestamp === 'number' && isSafeInt(timestamp) && timestamp > 0) time = timestamp;
  else if (typeof timestamp === 'string' && isoWithOffset.test(timestamp)) time = Date.parse(timestamp);
  else return undefined;
  if (building_id !== undefined && !(typeof building_id === 'number' && isSafeInt(building_id) && building_id > 0)) return undefined;
  if (floor_id !== undefined && !(typeof floor_id === 'number' && isSafeInt(floor_id) && floor_id > 0)) return undefined;
  const M = MAX_LOCAL_COORDINATE_METRES;
  if (!optionalNumberIn(x, -M, M) || !optionalNumberIn(y, -M, M) || !optionalNumberIn(lat, -90, 90) || !optionalNumberIn(lng, -180, 180))
    return undefined;
  if (yaw !== undefined && !(typeof yaw === 'number' && Number.isFinite(yaw))) return undefined;
  if (!optionalNumberIn(accuracy, 0, Number.MAX_VALUE)) return undefined;
  if (user_id !== undefined && !(typeof user_id === 'string' && uuidPattern.test(user_id))) return undefined;
  if (
    (danger !== undefined && typeof danger !== 'boolean') ||
    (assistance_request !== undefined && typeof assistance_request !== 'boolean')
  )
    return undefined;
  const indoor = floor_id !== undefined || x !== undefined || y !== undefined;
  if (
    indoor
      ? building_id === undefined || floor_id === undefined || x === undefined || y === undefined
      : lat === undefined || lng === undefined
  )
    return undefined;
  // One literal with every field, absent ones undefined: one shape for every pose the fast path makes.
  const pose: Pose = {
    device_id: deviceId,
    timestamp: time,
    building_id: building_id as number | undefined,
    floor_id: floor_id as number | undefined,
    x: x as number | undefined,
    y: y as number | undefined,
    lat: lat as number | undefined,
    lng: lng as number | undefined,
    yaw: (yaw as number | undefined) ?? 0,
    accuracy: accuracy as number | undefined,
    user_id: user_id as string | undefined,
    danger: danger as boolean | undefined,
    assistance_request: assistance_request as boolean | undefined,
  };
  return pose;
}
