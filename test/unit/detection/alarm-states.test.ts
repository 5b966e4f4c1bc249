import { describe, expect, it } from 'vitest';
import {
  ALARM_STATES,
  ALARM_TYPES,
  type AlarmState,
  INITIAL_ALARM_STATE,
  canTransition,
  isAlarmState,
  isAlarmType,
  isFinalAlarmState,
} from '../../../shared/detection/alarm-states.js';

// Written out by hand, rows are `from`, columns `to` in ALARM_STATES order, so the table is checked against an
// independent statement of the rule rather than against itself.
const O = 1;
const _ = 0;
const expected: Record<AlarmState, number[]> = {
  //            OPEN CLOSED CONFIRMED MARKED_FALSE OTHER
  OPEN: [_, O, O, O, O],
  CLOSED: [_, _, _, _, _],
  CONFIRMED: [_, O, _, _, O],
  MARKED_FALSE: [_, _, _, _, _],
  OTHER: [_, O, O, O, _],
};

describe('alarm transitions', () => {
  it('match the matrix, cell by cell', () => {
    expect(ALARM_STATES).toEqual(['OPEN', 'CLOSED', 'CONFIRMED', 'MARKED_FALSE', 'OTHER']);
    for (const from of ALARM_STATES) {
      ALARM_STATES.forEach((to, column) => {
        expect(canTransition(from, to), `${from} -> ${to}`).toBe(expected[from][column] === O);
      });
    }
  });

  it('never lead back to OPEN, and CLOSED and MARKED_FALSE are final', () => {
    expect(INITIAL_ALARM_STATE).toBe('OPEN');
    expect(ALARM_STATES.filter(isFinalAlarmState)).toEqual(['CLOSED', 'MARKED_FALSE']);
  });

  it('refuses strings that are not states, as untyped input may carry', () => {
    expect(canTransition('OPEN', 'RESOLVED' as AlarmState)).toBe(false);
    expect(canTransition('constructor' as AlarmState, 'CLOSED')).toBe(false);
    expect(canTransition('toString' as AlarmState, 'CLOSED')).toBe(false);
    expect(isAlarmState('OPEN')).toBe(true);
    expect(isAlarmState('open')).toBe(false);
  });

  it('list the spec alarm types', () => {
    expect([...ALARM_TYPES].sort()).toEqual([
      'ASSISTANCE_REQUEST',
      'BREACH',
      'BUILDING_SILENT',
      'DANGER',
      'DEADMAN',
      'EMERGENCY',
      'GEOFENCE_MAX_STAY_TIME',
      'STATIONARY',
    ]);
    expect(isAlarmType('DEADMAN')).toBe(true);
    expect(isAlarmType('FIRE')).toBe(false);
  });
});
