import type { AlarmType } from './alarm-states.js';

/**
 * How urgent each alarm type is, fixed per type (issue 27): critical is a person asking for help or in danger,
 * high is a person who may be down or a building that went silent, normal is a rule broken with nobody hurt.
 * The API sorts and filters by it, escalation watches the critical ones, closing a critical or high one needs
 * a comment, and the console orders its inbox by it. This map is the only place that says which is which.
 */
export const ALARM_SEVERITIES = ['critical', 'high', 'normal'] as const;
export type AlarmSeverity = (typeof ALARM_SEVERITIES)[number];

// BUILDING_SILENT (one alarm for a storm of silent devices) is named here ahead of its detector so that the type
// and its severity arrive together whichever lands first.
const SEVERITY_OF_TYPE: Readonly<Record<AlarmType | 'BUILDING_SILENT', AlarmSeverity>> = {
  DANGER: 'critical',
  EMERGENCY: 'critical',
  ASSISTANCE_REQUEST: 'critical',
  DEADMAN: 'high',
  BREACH: 'high',
  BUILDING_SILENT: 'high',
  GEOFENCE_MAX_STAY_TIME: 'normal',
  STATIONARY: 'normal',
};
const severities = new Map<string, AlarmSeverity>(Object.entries(SEVERITY_OF_TYPE));

/** The severity of a type; a type this build does not know (a newer node's, in a stored event) counts as normal. */
export function severityOf(type: string): AlarmSeverity {
  return severities.get(type) ?? 'normal';
}

/** 0 for critical, 1 for high, 2 for normal: worst first when sorted ascending. */
export function severityRank(severity: AlarmSeverity): number {
  return ALARM_SEVERITIES.indexOf(severity);
}

/** The types of a severity, in the map's order. */
export function typesOfSeverity(severity: AlarmSeverity): string[] {
  return [...severities].filter(([, of]) => of === severity).map(([type]) => type);
}

/** Whether closing or marking false an alarm of this type needs a resolution comment whatever the organization says. */
export function needsResolutionComment(type: string): boolean {
  return severityOf(type) !== 'normal';
}
