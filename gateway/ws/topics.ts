import { ForbiddenError, NotFoundError, ValidationError } from '../../shared/errors.js';
import type { Storage } from '../../shared/storage/index.js';
import { can, type Action } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';

/**
 * Topics a WebSocket can subscribe to. Keys are scoped by organization internally, so a device identifier
 * (unique only within an organization) never reaches another organization's subscribers.
 */
const BUILDING_TOPIC = /^buildings\/(\d+)\/(positions|geofence-events|alarms|evacuation)$/;
const DEVICE_TOPIC = /^devices\/(.{1,200})$/;

export const topicKey = (organizationId: string, topic: string) => `${organizationId}|${topic}`;

/**
 * Topics whose messages a plain user receives only when they are about that user (confinedUserId): positions
 * by the record's user, alarms, geofence events and event-area contents by `user_id`. `devices/{id}` is also
 * checked on subscribe, and again when the organization's devices change (a phone handed to someone else).
 */
const CONFINED_TOPIC = /^(buildings\/\d+\/(positions|geofence-events|alarms)|organization\/alarms|devices\/.+)$/;
export const isDeviceTopic = (topic: string): boolean => DEVICE_TOPIC.test(topic);
export const isConfinedTopic = (topic: string): boolean => CONFINED_TOPIC.test(topic);

/** An evacuation's roll shows where everyone is: for those who see every user's positions. */
const actionOf: Record<string, Action> = {
  positions: 'positions:read',
  'geofence-events': 'positions:read',
  alarms: 'alarms:read',
  evacuation: 'tracking:read-all',
};

/** Throws the AppError a refused subscription gets (the connection stays open). */
export async function authorizeTopic(topic: string, principal: Principal, registry: BuildingRegistry, storage: Storage): Promise<void> {
  if (principal.permission === 'positioning') throw new ForbiddenError('A positioning credential may only upload positions');
  const building = BUILDING_TOPIC.exec(topic);
  if (building) {
    if (!can(principal.role, actionOf[building[2]!]!)) throw new ForbiddenError(`Your role may not read ${building[2]}`);
    if (!(await registry.get(principal.organizationId, Number(building[1])))) throw new NotFoundError('Building');
    return;
  }
  if (topic === 'organization/alarms') {
    if (!can(principal.role, 'alarms:read')) throw new ForbiddenError('Your role may not read alarms');
    return;
  }
  const device = DEVICE_TOPIC.exec(topic);
  if (device) {
    const [row] = await storage.execute<{ user_id: string | null }>(
      'select user_id from devices where organization_id = ? and identifier = ?',
      [principal.organizationId, device[1]],
    );
    if (!row) throw new NotFoundError('Device');
    if (!can(principal.role, 'devices:read') && row.user_id !== principal.userId) throw new ForbiddenError('Not your device');
    return;
  }
  throw new ValidationError([
    {
      field: 'topics',
      message: `unknown topic ${topic}: buildings/{id}/positions|geofence-events|alarms|evacuation, organization/alarms, devices/{id}`,
    },
  ]);
}
