import { describe, expect, it } from 'vitest';
import {
  ACTIONS,
  assignableRoles,
  can,
  confinedUserId,
  mayChangeUser,
  mayRaiseAlarmType,
  type Action,
} from '../../gateway/auth/permissions.js';
import { ALARM_TYPES } from '../../shared/detection/alarm-states.js';
import { ROLES, type Role } from '../../shared/storage/entities/index.js';

/** The expected rules, written out independently of the implementation's table. */
const expected: Record<Action, Role[]> = {
  'organization:read': ['admin', 'user_manager', 'user'],
  'users:read': ['admin', 'user_manager'],
  'users:write': ['admin', 'user_manager'],
  'groups:read': ['admin', 'user_manager'],
  'groups:write': ['admin', 'user_manager'],
  'devices:read': ['admin', 'user_manager'],
  'devices:write': ['admin', 'user_manager'],
  'apikeys:own': ['admin', 'user_manager', 'user'],
  'apikeys:others': ['admin'],
  'apikeys:rates': ['admin'],
  'cartography:read': ['admin', 'user_manager', 'user'],
  'cartography:write': ['admin'],
  'positions:upload': ['admin', 'user_manager', 'user'],
  'positions:read': ['admin', 'user_manager', 'user'],
  'reports:read': ['admin', 'user_manager', 'user'],
  'alarms:read': ['admin', 'user_manager', 'user'],
  'alarms:raise': ['admin', 'user_manager', 'user'],
  'alarms:manage': ['admin', 'user_manager'],
  'alarms:configure': ['admin'],
  'audit:read': ['admin'],
  'tracking:read-all': ['admin', 'user_manager'],
  'webhooks:manage': ['admin'],
  'evacuations:manage': ['admin', 'user_manager'],
  'users:erase': ['admin'],
  'users:export-data': ['admin'],
  'privacy:configure': ['admin'],
  'alarms:raise-system': [],
};

describe('role table', () => {
  it('covers every action', () => {
    expect(Object.keys(expected).sort()).toEqual([...ACTIONS].sort());
  });

  const cells = ACTIONS.flatMap((action) => ROLES.map((role) => ({ action, role, allowed: expected[action].includes(role) })));
  it.each(cells)('$role may $action: $allowed', ({ action, role, allowed }) => {
    expect(can(role, action)).toBe(allowed);
  });

  it('confines a plain user to their own user id, and lets managers see the organization', () => {
    expect(confinedUserId({ role: 'user', userId: 'u1' })).toBe('u1');
    expect(confinedUserId({ role: 'user_manager', userId: 'u2' })).toBeUndefined();
    expect(confinedUserId({ role: 'admin', userId: 'u3' })).toBeUndefined();
  });

  it('never lets a role hand out a role above its own', () => {
    expect(assignableRoles('admin')).toEqual(['admin', 'user_manager', 'user']);
    expect(assignableRoles('user_manager')).toEqual(['user_manager', 'user']);
    expect(assignableRoles('user')).toEqual([]);
  });

  it('lets every role raise DANGER and ASSISTANCE_REQUEST by hand, and no role any system type', () => {
    for (const role of ROLES) {
      expect(ALARM_TYPES.filter((type) => mayRaiseAlarmType(role, type))).toEqual(['DANGER', 'ASSISTANCE_REQUEST']);
    }
  });

  it('lets only the platform administrator change the platform administrator', () => {
    const platform = { id: 'p', platformAdmin: true };
    expect(mayChangeUser({ userId: 'p' }, platform)).toBe(true);
    expect(mayChangeUser({ userId: 'a' }, platform)).toBe(false);
    expect(mayChangeUser({ userId: 'a' }, { id: 'b', platformAdmin: false })).toBe(true);
  });
});
