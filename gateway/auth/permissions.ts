import type { AlarmType } from '../../shared/detection/alarm-states.js';
import type { Role } from '../../shared/storage/entities/user.entity.js';

/**
 * Everything a caller can be allowed to do. Routes name the action they need; this file alone decides
 * which role may do it, so the rules read (and are tested) as one table.
 */
export const ACTIONS = [
  'organization:read',
  'users:read',
  'users:write',
  'groups:read',
  'groups:write',
  'devices:read',
  'devices:write',
  'apikeys:own',
  'apikeys:others',
  /** Give an API key its own rate limits (up to the platform maximum): a budget nobody widens on their own. */
  'apikeys:rates',
  'cartography:read',
  'cartography:write',
  'positions:upload',
  'positions:read',
  'reports:read',
  'alarms:read',
  'alarms:raise',
  'alarms:manage',
  /** Set the organization's alarm policy (escalation, resolution comments): admins only. */
  'alarms:configure',
  /** Read the audit log of the organization (admins only). */
  'audit:read',
  /** See the positions, devices and alarms of every user of the organization, not only one's own. */
  'tracking:read-all',
  /** Outbound webhooks: they carry the whole organization's events to another system, and hold its signing secrets. */
  'webhooks:manage',
  /** Declare and end an evacuation of a building, and mark people on its roll safe (admins and user managers). */
  'evacuations:manage',
  /** Erase a person's history (positions, zone events, stays, rollups; their alarms pseudonymized): admins only. */
  'users:erase',
  /** Export everything held about another person of the organization (everyone may export their own): admins only. */
  'users:export-data',
  /** Set the organization's privacy settings (reports pseudonymous for everyone but admins): admins only. */
  'privacy:configure',
  /** Raise alarm types that only the system raises (DEADMAN, GEOFENCE_MAX_STAY_TIME...): nobody holds it. */
  'alarms:raise-system',
] as const;
export type Action = (typeof ACTIONS)[number];

const everyone: Action[] = [
  'organization:read',
  'apikeys:own',
  'cartography:read',
  'positions:upload',
  'positions:read',
  'reports:read',
  'alarms:read',
  'alarms:raise',
];

/** The role table. Admins do everything in their organization; user managers run people and devices. */
export const ROLE_PERMISSIONS: Readonly<Record<Role, ReadonlySet<Action>>> = {
  admin: new Set<Action>(ACTIONS.filter((action) => action !== 'alarms:raise-system')),
  user_manager: new Set<Action>([
    ...everyone,
    'users:read',
    'users:write',
    'groups:read',
    'groups:write',
    'devices:read',
    'devices:write',
    'alarms:manage',
    'tracking:read-all',
    'evacuations:manage',
  ]),
  user: new Set<Action>(everyone),
};

export const can = (role: Role, action: Action): boolean => ROLE_PERMISSIONS[role]?.has(action) ?? false;

/** Which roles a caller may hand out: nobody can create a user above their own rank. */
export function assignableRoles(role: Role): Role[] {
  if (role === 'admin') return ['admin', 'user_manager', 'user'];
  if (role === 'user_manager') return ['user_manager', 'user'];
  return [];
}

/**
 * The one visibility rule for positions, devices and alarms: a caller whose role lacks `tracking:read-all`
 * sees (and uploads) only what is about their own user. Returns the user id to confine a query, a topic or a
 * replay to, or undefined when the caller sees the whole organization. REST, WebSocket topics, replay, history,
 * exports and reports all ask this function.
 */
export const confinedUserId = (principal: { role: Role; userId: string }): string | undefined =>
  can(principal.role, 'tracking:read-all') ? undefined : principal.userId;

/** The alarm types a person raises (through `POST /api/v1/alarms`); every other type is the system's. */
export const USER_ALARM_TYPES = ['DANGER', 'ASSISTANCE_REQUEST'] as const satisfies readonly AlarmType[];

/** Whether a role may raise an alarm of this type by hand: the user types, or a system type with `alarms:raise-system`. */
export const mayRaiseAlarmType = (role: Role, type: AlarmType): boolean =>
  (USER_ALARM_TYPES as readonly string[]).includes(type) || can(role, 'alarms:raise-system');

/**
 * The platform administrator (who creates organizations) is changed only by itself: another admin of its
 * organization may not reset its password, edit it or manage its API keys, or the platform could be taken over
 * from inside one organization.
 */
export const mayChangeUser = (principal: { userId: string }, target: { id: string; platformAdmin: boolean }): boolean =>
  !target.platformAdmin || target.id === principal.userId;

/**
 * Whether a caller may change another user's sign-in (password, e-mail) or delete them: a user_manager only
 * for plain users and themself, never for a peer user_manager, who could otherwise be taken over. Admins
 * manage every non-platform user, peers included (the role check and `mayChangeUser` come first).
 */
export const mayTakeOverUser = (principal: { userId: string; role: Role }, target: { id: string; role: Role }): boolean =>
  principal.role === 'admin' || target.id === principal.userId || target.role === 'user';
