import { ALARM_SEVERITIES, severityRank, typesOfSeverity, type AlarmSeverity } from '../../shared/detection/alarm-severity.js';
import type { AlarmState, AlarmType } from '../../shared/detection/alarm-states.js';
import { ValidationError } from '../../shared/errors.js';
import type { Storage } from '../../shared/storage/index.js';
import { confinedUserId } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { AlarmView } from './alarm-event-message.js';
import { presentAlarm, type AlarmRow } from './alarm-service.js';

/** The filters, sort and page of GET /api/v1/alarms, as its query schema has validated them. */
export interface AlarmListQuery {
  building_id?: number;
  state?: readonly AlarmState[];
  type?: readonly AlarmType[];
  severity?: readonly AlarmSeverity[];
  device_id?: string;
  user_id?: string;
  from_date?: string;
  to_date?: string;
  /** `field` or `field,asc|desc`; severity (worst first) when absent. */
  sort?: string;
  direction?: string;
  page: number;
  size: number;
}

/**
 * Sortable fields and their SQL. A Map, so that `sort=constructor` or `__proto__` is an unknown field (422), not a
 * property of Object.prototype. Severity sorts worst first ascending (its rank, from the one severity map) and
 * newest first within.
 */
const severityOrder = `case type ${ALARM_SEVERITIES.flatMap((severity) => typesOfSeverity(severity).map((type) => `when '${type}' then ${severityRank(severity)}`)).join(' ')} else ${severityRank('normal')} end`;
const ALARM_SORT = new Map<string, (direction: 'asc' | 'desc') => string>([
  ['severity', (direction) => `${severityOrder} ${direction}, created_at desc`],
  ...['created_at', 'updated_at', 'seq', 'type', 'state'].map(
    (column) => [column, (direction: 'asc' | 'desc') => `${column} ${direction}`] as const,
  ),
]);

/**
 * One page of an organization's alarms, filtered and sorted, and how many match in all. A plain user gets only
 * the alarms about themself (confinedUserId), whatever the filters say.
 */
export async function listAlarms(
  storage: Storage,
  principal: Principal,
  query: AlarmListQuery,
): Promise<{ alarms: AlarmView[]; total: number }> {
  const where: string[] = ['organization_id = ?'];
  const params: unknown[] = [principal.organizationId];
  const add = (condition: string, ...values: unknown[]) => (where.push(condition), params.push(...values));
  if (query.building_id) add('building_id = ?', query.building_id);
  if (query.state) add(`state in (${query.state.map(() => '?').join(', ')})`, ...query.state);
  if (query.type) add(`type in (${query.type.map(() => '?').join(', ')})`, ...query.type);
  if (query.severity) {
    const types = query.severity.flatMap(typesOfSeverity);
    add(`type in (${types.map(() => '?').join(', ')})`, ...types);
  }
  if (query.device_id) add('device_id = ?', query.device_id);
  if (query.user_id) add('user_id = ?', query.user_id);
  if (query.from_date) add('created_at >= ?', new Date(query.from_date));
  if (query.to_date) add('created_at < ?', new Date(query.to_date));
  const confined = confinedUserId(principal);
  if (confined !== undefined) add('user_id = ?', confined);
  const [field, inline] = (query.sort ?? 'severity,asc').split(',');
  const orderBy = ALARM_SORT.get(field!);
  if (!orderBy) throw new ValidationError([{ field: 'query.sort', message: `sortable fields: ${[...ALARM_SORT.keys()].join(', ')}` }]);
  const direction = (inline ?? query.direction ?? (field === 'severity' ? 'asc' : 'desc')).toLowerCase() === 'asc' ? 'asc' : 'desc';
  const [{ total }] = (await storage.execute<{ total: number }>(
    `select count(*)::int as total from alarms where ${where.join(' and ')}`,
    params,
  )) as [{ total: number }];
  const rows = await storage.execute<AlarmRow>(
    `select * from alarms where ${where.join(' and ')} order by ${orderBy(direction)}, id limit ? offset ?`,
    [...params, query.size, query.page * query.size],
  );
  return { alarms: rows.map(presentAlarm), total };
}
