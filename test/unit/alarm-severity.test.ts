import { describe, expect, it } from 'vitest';
import { commentRequired } from '../../gateway/alarms/alarm-settings.js';
import {
  ALARM_SEVERITIES,
  needsResolutionComment,
  severityOf,
  severityRank,
  typesOfSeverity,
} from '../../shared/detection/alarm-severity.js';
import { ALARM_STATES, ALARM_TYPES } from '../../shared/detection/alarm-states.js';

describe('alarm severity', () => {
  it('gives every type its documented severity', () => {
    const documented: Record<string, string> = {
      DANGER: 'critical',
      EMERGENCY: 'critical',
      ASSISTANCE_REQUEST: 'critical',
      DEADMAN: 'high',
      BREACH: 'high',
      BUILDING_SILENT: 'high',
      GEOFENCE_MAX_STAY_TIME: 'normal',
      STATIONARY: 'normal',
    };
    for (const type of ALARM_TYPES) expect(severityOf(type), type).toBe(documented[type]);
    for (const severity of ALARM_SEVERITIES)
      expect(typesOfSeverity(severity).sort()).toEqual(
        Object.keys(documented)
          .filter((type) => documented[type] === severity)
          .sort(),
      );
  });

  it('ranks worst first and treats a type it does not know, or a prototype key, as normal', () => {
    expect(ALARM_SEVERITIES.map(severityRank)).toEqual([0, 1, 2]);
    for (const unknown of ['FIRE', 'constructor', '__proto__', 'toString', '']) expect(severityOf(unknown), unknown).toBe('normal');
  });

  it('asks a resolution comment for closing or marking false a critical or high alarm, or any when the organization says so', () => {
    for (const type of ALARM_TYPES) {
      for (const state of ALARM_STATES) {
        const verdict = state === 'CLOSED' || state === 'MARKED_FALSE';
        expect(commentRequired(type, state, { comment_always: false }), `${type} -> ${state}`).toBe(
          verdict && needsResolutionComment(type),
        );
        expect(commentRequired(type, state, { comment_always: true }), `${type} -> ${state}, always`).toBe(verdict);
      }
    }
    expect(needsResolutionComment('DEADMAN')).toBe(true);
    expect(needsResolutionComment('STATIONARY')).toBe(false);
  });
});
