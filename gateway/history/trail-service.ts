import { ValidationError } from '../../shared/errors.js';
import { PositionTrail } from '../../shared/positions/position-trail.js';
import type { Storage } from '../../shared/storage/storage.js';
import { confinedUserId } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { CartographyService } from '../cartography/cartography-service.js';
import { reportsPseudonymous } from '../privacy/organization-privacy.js';

/** The longest range one trail covers. */
export const MAX_TRAIL_HOURS = 24;
/** Fixes one trail holds at most (and by default): past them, the newest are sent and `truncated` says so. */
export const MAX_TRAIL_FIXES = 10_000;
export const DEFAULT_TRAIL_FIXES = 5_000;

export interface TrailRequest {
  deviceId: string;
  from: number;
  to: number;
  limit: number;
}

/** One fix of `GET /api/v1/buildings/{id}/trail`. */
export interface TrailPoint {
  /** When the fix was taken (ISO 8601, UTC). */
  ts: string;
  /** When it first reached the server. */
  received_at: string;
  /** received_at - ts, in ms (negative when the device's clock runs ahead of the server's). */
  delay_ms: number;
  /** It reached the server more than the reorder window after it was taken. */
  late: boolean;
  floor_id: number;
  x: number;
  y: number;
}

export interface Trail {
  device_id: string;
  building_id: number;
  from: string;
  to: string;
  /** DETECTION_REORDER_WINDOW_SECONDS in ms: a fix whose delay is over it is late. */
  reorder_window_ms: number;
  /** More fixes than `limit` in the range: the newest `limit` are sent. */
  truncated: boolean;
  late_count: number;
  data: TrailPoint[];
}

/**
 * A device's trail in a building with each fix's arrival (issue 30 item 6): the console draws the fixes that came
 * late (more than the reorder window after they were taken, as late alarms and the evidence of a silence DEADMAN
 * count them) differently. A Floorcast extension: the spec's `raw_data` report keeps its shape.
 */
export class TrailService {
  private readonly trail: PositionTrail;

  constructor(
    private readonly storage: Storage,
    private readonly cartography: CartographyService,
    /** DETECTION_REORDER_WINDOW_SECONDS in ms. */
    private readonly reorderWindowMs: number,
  ) {
    this.trail = new PositionTrail(storage);
  }

  /**
   * The building must be the caller's (404 otherwise); a plain user sees only their own fixes (permissions.ts,
   * confinedUserId), so another's device has an empty trail for them. Naming a device is refused (422) to whoever
   * the organization's privacy settings make reports pseudonymous for, as the history and the reports refuse it.
   */
  async read(principal: Principal, buildingId: number, request: TrailRequest): Promise<Trail> {
    await this.cartography.building(this.storage.em(), principal, buildingId);
    if (principal.role !== 'admin' && (await reportsPseudonymous(this.storage, principal.organizationId)))
      throw new ValidationError([{ field: 'query.device_id', message: 'not while reports are pseudonymous for you' }]);
    const { fixes, truncated } = await this.trail.read({
      organizationId: principal.organizationId,
      buildingId,
      deviceId: request.deviceId,
      from: request.from,
      to: request.to,
      userId: confinedUserId(principal),
      limit: request.limit,
    });
    const data = fixes.map((fix): TrailPoint => {
      const delay = fix.receivedAt - fix.timestamp;
      return {
        ts: new Date(fix.timestamp).toISOString(),
        received_at: new Date(fix.receivedAt).toISOString(),
        delay_ms: delay,
        late: delay > this.reorderWindowMs,
        floor_id: fix.floorId,
        x: fix.x,
        y: fix.y,
      };
    });
    return {
      device_id: request.deviceId,
      building_id: buildingId,
      from: new Date(request.from).toISOString(),
      to: new Date(request.to).toISOString(),
      reorder_window_ms: this.reorderWindowMs,
      truncated,
      late_count: data.filter((point) => point.late).length,
      data,
    };
  }
}
