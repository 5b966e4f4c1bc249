import type { ReportColumn, ReportName } from './report-params.js';

const col = (name: string, type: ReportColumn['type'], nullable = false): ReportColumn => ({ name, type, nullable });

/**
 * Each report's columns, in order: the keys of its JSON rows and its `meta`, the header of its CSV, and the row
 * the OpenAPI document gives it (reports.route.ts), so the document cannot drift from what a report returns.
 */
export const REPORT_COLUMNS: Record<ReportName, ReportColumn[]> = {
  geofencing_sessions_matches: [
    col('device_id', 'string'),
    col('user_id', 'string', true),
    col('geofence_id', 'string'),
    col('geofence_name', 'string'),
    col('entered_at', 'datetime'),
    col('exited_at', 'datetime'),
    col('duration_s', 'number'),
    col('positions', 'integer'),
  ],
  geofencing_stay_time: [
    col('group', 'string'),
    col('device_id', 'string'),
    col('user_id', 'string', true),
    col('geofence_id', 'string'),
    col('geofence_name', 'string'),
    col('sessions', 'integer'),
    col('stay_time_s', 'number'),
    col('first_entry', 'datetime'),
    col('last_exit', 'datetime'),
  ],
  visitors: [col('group', 'string'), col('visitors', 'integer'), col('devices', 'integer'), col('positions', 'integer')],
  positioning_time: [
    col('group', 'string'),
    col('devices', 'integer'),
    col('sessions', 'integer'),
    col('total_time_s', 'number'),
    col('min_s', 'number'),
    col('avg_s', 'number'),
    col('p50_s', 'number'),
    col('p90_s', 'number'),
    col('max_s', 'number'),
  ],
  heatmap: [col('geohash', 'string'), col('lat', 'number'), col('lng', 'number'), col('weight', 'integer'), col('positions', 'integer')],
  raw_data: [
    col('timestamp', 'datetime'),
    col('device_id', 'string'),
    col('user_id', 'string', true),
    col('building_id', 'integer', true),
    col('floor_id', 'integer', true),
    col('indoor', 'boolean'),
    col('x', 'number', true),
    col('y', 'number', true),
    col('lat', 'number'),
    col('lng', 'number'),
    col('yaw', 'number'),
    col('accuracy', 'number', true),
  ],
  user_positions: [
    col('timestamp', 'datetime'),
    col('session_mark', 'integer'),
    col('floor_id', 'integer', true),
    col('user_id', 'string', true),
    col('device_id', 'string'),
    col('lat', 'number'),
    col('lng', 'number'),
  ],
};
