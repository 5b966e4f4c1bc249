import { z } from 'zod';
import { latitude, longitude } from '../cartography/placement.js';

/** Fixes more than this far in the future are refused: the device clock is wrong, and history would lie. */
export const MAX_CLOCK_SKEW_MS = 5 * 60 * 1000;

/**
 * One pose of an UploadPosesForm. Indoor: `building_id`, `floor_id`, `x`, `y` (metres); outdoor: `lat`, `lng`
 * (optional `building_id`). `timestamp` is ISO 8601 with an offset, or epoch milliseconds.
 */
export const poseSchema = z
  .object({
    device_id: z.union([z.string().trim().min(1).max(200), z.number().int().nonnegative()]).transform(String).describe('The identifier the app uses'),
    timestamp: z
      .union([z.number().int().positive().describe('epoch milliseconds'), z.iso.datetime({ offset: true, message: 'ISO 8601 with an offset, or epoch milliseconds' })])
      .transform((value) => (typeof value === 'number' ? value : Date.parse(value))),
    building_id: z.coerce.number().int().positive().optional(),
    floor_id: z.coerce.number().int().positive().optional(),
    x: z.number().finite().optional(),
    y: z.number().finite().optional(),
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
    if (pose.timestamp > Date.now() + MAX_CLOCK_SKEW_MS) context.addIssue({ code: 'custom', path: ['timestamp'], message: 'more than 5 minutes in the future' });
  });

export type Pose = z.infer<typeof poseSchema>;

export const uploadPosesSchema = z.object({
  poses: z.array(z.unknown()).min(1, 'at least one pose').max(10_000, 'at most 10,000 poses per upload'),
});
