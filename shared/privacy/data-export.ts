import { csvRow, type CsvValue } from '../csv/csv.js';
import { ConflictError, ValidationError } from '../errors.js';
import type { Storage } from '../storage/index.js';
import { writeZip, type ZipEntry } from './zip.js';

/**
 * A person's data export (issue 32, access and portability): everything held about one user, as one JSON and one CSV
 * file per kind of data, in a zip. Runs as a job (in-process, or on the workers) and hands the archive back in its
 * result, as a report job hands back its answer; nothing is kept afterwards.
 *
 * "About the person" is read as the erasure reads it (erasure.ts): rows carrying their user id. Their profile (no
 * password hash), devices, API keys (no key hash), tracking window, positions, zone events, kept stays, alarms and
 * those alarms' events, evacuation roll entries, and the audit entries they made or that are about them (their
 * account, their window, an erasure of their history).
 */
export const DATA_EXPORT_JOB = 'data-export';

/** Past this many positions in one export it is refused (422): the archive is built in memory. Narrow from..to. */
export const MAX_EXPORT_POSITIONS = 250_000;

export interface DataExportJob {
  organizationId: string;
  userId: string;
  from?: string;
  to?: string;
}

export interface DataExportResult {
  filename: string;
  /** The zip archive, in base64 (a job's result travels as JSON through Redis). */
  zip: string;
  /** Rows per file. */
  counts: Record<string, number>;
}

type Row = Record<string, unknown>;

/** Columns never exported, whatever the table: the scoping key, and secrets. */
const OMITTED = new Set(['organization_id', 'password_hash', 'key_hash']);
/** jsonb columns, which one driver hands back as text: exported as the JSON they hold on both. */
const JSON_COLUMNS = new Set(['details', 'history', 'alarm', 'changes', 'schedule', 'device_ids', 'marked_by', 'floor_ids']);

interface Section {
  name: string;
  /** A statement with `?` for the organization and the user, in that order; `range(column)` appends the window. */
  sql: (range: (column: string) => string, maxPositions: number) => string;
  /** Parameters per `?`: `org`, `user`. */
  params: ('org' | 'user')[];
}

const SECTIONS: Section[] = [
  {
    name: 'profile',
    sql: () =>
      `select u.*, g.name as group_name from users u left join groups g on g.id = u.group_id where u.organization_id = ? and u.id = ?`,
    params: ['org', 'user'],
  },
  {
    name: 'devices',
    sql: () => `select * from devices where organization_id = ? and user_id = ? order by identifier`,
    params: ['org', 'user'],
  },
  {
    name: 'api_keys',
    sql: () => `select * from api_keys where organization_id = ? and user_id = ? order by created_at`,
    params: ['org', 'user'],
  },
  {
    name: 'tracking_window',
    sql: () => `select schedule, updated_at from tracking_windows where organization_id = ? and user_id = ?`,
    params: ['org', 'user'],
  },
  {
    name: 'positions',
    sql: (range, maxPositions) =>
      `select * from positions where organization_id = ? and user_id = ?${range('ts')} order by ts, device_id limit ${maxPositions + 1}`,
    params: ['org', 'user'],
  },
  {
    name: 'zone_events',
    sql: (range) => `select * from zone_events where organization_id = ? and user_id = ?${range('at')} order by at, device_id`,
    params: ['org', 'user'],
  },
  {
    name: 'geofence_stays',
    sql: (range) =>
      `select * from geofence_stays where organization_id = ? and user_id = ?${range('first_ts')} order by first_ts, device_id`,
    params: ['org', 'user'],
  },
  {
    name: 'alarms',
    sql: (range) => `select * from alarms where organization_id = ? and user_id = ?${range('created_at')} order by created_at, id`,
    params: ['org', 'user'],
  },
  {
    name: 'alarm_events',
    sql: (range) =>
      `select e.* from alarm_events e join alarms a on a.id = e.alarm_id
       where a.organization_id = ? and a.user_id = ?${range('a.created_at')} order by e.seq`,
    params: ['org', 'user'],
  },
  {
    name: 'evacuation_roll',
    sql: (range) =>
      `select r.*, e.building_id, e.started_at as evacuation_started_at from evacuation_roll r join evacuations e on e.id = r.evacuation_id
       where e.organization_id = ? and r.user_id = ?${range('e.started_at')} order by e.started_at`,
    params: ['org', 'user'],
  },
  {
    // What they did, and what was done to their account, their window or their history.
    name: 'audit_log',
    sql: (range) =>
      `select * from audit_log where organization_id = ? and (user_id = ?::uuid
         or (object_type = 'users' and object_id = ?::text)
         or (object_type = 'tracking_windows' and object_id = 'user:' || ?::text)
         or (object_type = 'erasures' and changes #>> '{after,user_id}' = ?::text)
         or (object_type = 'data_exports' and object_id = ?::text))${range('at')} order by id`,
    params: ['org', 'user', 'user', 'user', 'user', 'user'],
  },
];

/** Builds the archive of one person's data; 422 (naming `from`) when there are more positions than one export holds. */
export async function runDataExport(
  storage: Pick<Storage, 'execute'>,
  job: DataExportJob,
  maxPositions = MAX_EXPORT_POSITIONS,
): Promise<DataExportResult> {
  const [exists] = await storage.execute<{ id: string }>('select id from users where organization_id = ? and id = ?', [
    job.organizationId,
    job.userId,
  ]);
  // The gateway checked the person; a job naming no one (erased since) is refused rather than answered empty.
  if (!exists) throw new ValidationError([{ field: 'id', message: 'no such user in the organization' }]);
  const [{ started }] = (await storage.execute<{ started: string }>('select now() as started')) as [{ started: string }];
  const range = (column: string) => `${job.from ? ` and ${column} >= ?` : ''}${job.to ? ` and ${column} <= ?` : ''}`;
  const rangeParams = [job.from, job.to].filter((value): value is string => value !== undefined);
  const files: ZipEntry[] = [];
  const counts: Record<string, number> = {};
  for (const section of SECTIONS) {
    let ranged = false;
    const text = section.sql((column) => {
      ranged = true;
      return range(column);
    }, maxPositions);
    // The window's parameters come last: every statement ends its where clause with the range.
    const params = [...section.params.map((param) => (param === 'org' ? job.organizationId : job.userId)), ...(ranged ? rangeParams : [])];
    const rows = (await storage.execute<Row>(text, params)).map(clean);
    if (section.name === 'positions' && rows.length > maxPositions) {
      throw new ValidationError(
        [{ field: 'query.from', message: `more than ${maxPositions} positions: export the history in parts with from and to` }],
        'Too many positions for one export',
      );
    }
    counts[section.name] = rows.length;
    files.push({ name: `${section.name}.json`, data: Buffer.from(JSON.stringify(rows, null, 1), 'utf8') });
    files.push({ name: `${section.name}.csv`, data: Buffer.from(toCsv(rows), 'utf8') });
  }
  // An erasure of the person asked while this export ran wins: what was read goes nowhere (the request is 409).
  const [erased] = await storage.execute<{ id: string }>(
    'select id from erasure_requests where organization_id = ? and user_id = ? and created_at >= ? limit 1',
    [job.organizationId, job.userId, started],
  );
  if (erased) throw new ConflictError('The person’s data was erased while the export ran: nothing of it is handed out');
  const manifest = {
    user_id: job.userId,
    generated_at: new Date().toISOString(),
    from: job.from ?? null,
    to: job.to ?? null,
    files: counts,
    note: 'Everything Floorcast holds about this person: one JSON and one CSV file per kind of data. Times are UTC.',
  };
  files.unshift({ name: 'export.json', data: Buffer.from(JSON.stringify(manifest, null, 1), 'utf8') });
  return { filename: `floorcast-data-export-${job.userId}.zip`, zip: writeZip(files).toString('base64'), counts };
}

function clean(row: Row): Row {
  const out: Row = {};
  for (const [key, value] of Object.entries(row)) {
    if (OMITTED.has(key)) continue;
    if (value instanceof Date) out[key] = value.toISOString();
    else if (JSON_COLUMNS.has(key) && typeof value === 'string') out[key] = JSON.parse(value);
    else out[key] = value;
  }
  return out;
}

/** One CSV of rows: the columns of the first row (every row of a statement has the same), objects as JSON text. */
function toCsv(rows: Row[]): string {
  const first = rows[0];
  if (!first) return '';
  const columns = Object.keys(first);
  let text = csvRow(columns);
  for (const row of rows) {
    text += csvRow(
      columns.map((column): CsvValue => {
        const value = row[column];
        if (value !== null && typeof value === 'object') return JSON.stringify(value);
        if (typeof value === 'bigint') return String(value);
        return value as CsvValue;
      }),
    );
  }
  return text;
}
