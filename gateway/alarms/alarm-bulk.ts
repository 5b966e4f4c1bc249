import { typesOfSeverity, type AlarmSeverity } from '../../shared/detection/alarm-severity.js';
import { canTransition, type AlarmState } from '../../shared/detection/alarm-states.js';
import { AppError, ValidationError } from '../../shared/errors.js';
import type { Storage } from '../../shared/storage/index.js';
import type { AlarmHistoryEntry } from './alarm-event-message.js';
import type { AlarmService, AlarmWriteHook } from './alarm-service.js';
import { assertResolutionComment, readAlarmSettings } from './alarm-settings.js';

/** Alarms one bulk request may change: enough for a storm's cards, few enough to finish within a request. */
export const BULK_MAX = 500;

export interface BulkFilter {
  type?: string[];
  severity?: AlarmSeverity[];
  building_id?: number;
  state?: AlarmState[];
  from_date?: string;
  to_date?: string;
}

export interface BulkRequest {
  ids?: string[];
  filter?: BulkFilter;
  state: AlarmState;
  comment?: string;
}

export interface BulkResult {
  /** Alarms the ids and filter named. */
  matched: number;
  /** How many changed state, and which. */
  changed: number;
  changed_ids: string[];
  /** Named but left as they were: already in that state, or in a state it cannot follow. */
  skipped: { id: string; state: AlarmState; reason: string }[];
}

/**
 * One state change for many alarms ("close all these" after a storm). The alarms are chosen by ids and/or a
 * filter within the caller's organization (and, for a confined caller, about themself), at most BULK_MAX of them
 * (422 past it, before anything changes); each then changes as one PATCH would: its own seq, alarm event, push,
 * webhook and, through `hook`, audit entry. A comment the move needs is checked for all of them first.
 */
export async function bulkChangeState(
  alarms: AlarmService,
  storage: Storage,
  scope: { organizationId: string; confinedUserId?: string },
  request: BulkRequest,
  by: AlarmHistoryEntry['by'],
  hook?: AlarmWriteHook,
): Promise<BulkResult> {
  if (request.ids === undefined && request.filter === undefined)
    throw new ValidationError([{ field: 'ids', message: 'name the alarms by ids, a filter, or both' }]);
  const where: string[] = ['organization_id = ?'];
  const params: unknown[] = [scope.organizationId];
  const add = (condition: string, values: readonly unknown[]) => (where.push(condition), params.push(...values));
  const anyOf = (column: string, values: readonly unknown[]) =>
    add(values.length ? `${column} in (${values.map(() => '?').join(', ')})` : 'false', values);
  const { ids, filter = {} } = request;
  if (ids) anyOf('id', ids);
  if (filter.type) anyOf('type', filter.type);
  if (filter.severity) anyOf('type', filter.severity.flatMap(typesOfSeverity));
  if (filter.state) anyOf('state', filter.state);
  if (filter.building_id !== undefined) add('building_id = ?', [filter.building_id]);
  if (filter.from_date) add('created_at >= ?', [new Date(filter.from_date)]);
  if (filter.to_date) add('created_at < ?', [new Date(filter.to_date)]);
  if (scope.confinedUserId !== undefined) add('user_id = ?', [scope.confinedUserId]);
  const named = await storage.execute<{ id: string; type: string; state: AlarmState }>(
    `select id, type, state from alarms where ${where.join(' and ')} order by created_at, id limit ?`,
    [...params, BULK_MAX + 1],
  );
  if (named.length > BULK_MAX)
    throw new ValidationError([
      { field: 'filter', message: `names more than ${BULK_MAX} alarms: narrow it (by time, type or building) and repeat` },
    ]);
  const settings = await readAlarmSettings(storage, scope.organizationId);
  const movable = named.filter((alarm) => canTransition(alarm.state, request.state));
  for (const alarm of movable) assertResolutionComment(alarm.type, request.state, request.comment, settings);

  const result: BulkResult = { matched: named.length, changed: 0, changed_ids: [], skipped: [] };
  for (const alarm of named) {
    if (!movable.includes(alarm)) {
      result.skipped.push({
        id: alarm.id,
        state: alarm.state,
        reason: alarm.state === request.state ? 'already in that state' : `${alarm.state} cannot become ${request.state}`,
      });
      continue;
    }
    try {
      await alarms.changeState(scope.organizationId, alarm.id, request.state, request.comment ?? null, by, hook);
      result.changed_ids.push(alarm.id);
    } catch (error) {
      // Changed by someone else since it was chosen (409), or deleted with its organization (404): left as it is.
      if (!(error instanceof AppError) || (error.status !== 409 && error.status !== 404)) throw error;
      result.skipped.push({ id: alarm.id, state: alarm.state, reason: error.message });
    }
  }
  result.changed = result.changed_ids.length;
  return result;
}
