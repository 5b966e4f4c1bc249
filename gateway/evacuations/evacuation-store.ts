import type { EntityManager } from '@mikro-orm/postgresql';
import type { Storage } from '../../shared/storage/index.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import type { RollStatus } from '../../shared/evacuations/roll-counts.js';
import type { Fix, MusterPoint, RollEntry } from './roll.js';
import type { StoredPlaceRow } from '../../shared/positions/position-record.js';

/** Who did something: a user (and the address they signed in with), as the audit log and the roll show it. */
export interface Actor {
  user_id: string;
  email: string;
}

export interface EvacuationRow {
  id: string;
  organizationId: string;
  buildingId: number;
  floorIds: number[] | null;
  note: string | null;
  drill: boolean;
  startedAt: Date;
  startedBy: Actor;
  endedAt: Date | null;
  endedBy: Actor | null;
}

/** A roll entry as stored: the pure entry plus who marked it, with what comment, and its change seq. */
export interface StoredEntry extends RollEntry {
  markedBy: Actor | null;
  comment: string | null;
  seq: number;
}

type Execute = Pick<Storage, 'execute'> | EntityManager;
/** A read on the storage, or inside a write's transaction (both take `?` parameters and return rows). */
const run = <T>(on: Execute, sql: string, params: unknown[]): Promise<T[]> =>
  (on as { execute(sql: string, params: unknown[]): Promise<unknown> }).execute(sql, params) as Promise<T[]>;
/**
 * Many rows read as one JSON text: `select <columns> from <rest>` answered as `json_agg(json_build_array(...))`
 * (in `order` if given), each row back as a record keyed by the columns' names. What a large read costs is the
 * driver's parsing of each value of a result: PGlite's, in JavaScript, about 3 µs a value on this project's
 * 2-core box, so 5,000 roll rows of 17 columns took 190-450 ms as rows and 40-125 ms as one text (on PostgreSQL
 * 40-60 ms against 50-85 ms as rows in one run, about the same in another; `json_agg` of row objects was
 * slower). The values come back as their JSON: timestamps as ISO text, numbers as numbers (shortest exact),
 * json columns as themselves.
 */
async function jsonRows<T>(on: Execute, columns: readonly string[], rest: string, params: unknown[], order?: string): Promise<T[]> {
  const sql = `select json_agg(json_build_array(${columns.join(', ')})${order ? ` order by ${order}` : ''})::text as rows from ${rest}`;
  const [row] = await run<{ rows: string | null }>(on, sql, params);
  if (!row?.rows) return [];
  const names = columns.map((column) => column.slice(column.lastIndexOf('.') + 1));
  return (JSON.parse(row.rows) as unknown[][]).map((values) => {
    const record: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++) record[names[i]!] = values[i];
    return record as T;
  });
}
const json = <T>(value: unknown): T => (typeof value === 'string' ? JSON.parse(value) : value) as T;
const ms = (value: Date | string | null): number | null => (value === null ? null : new Date(value).getTime());

interface EvacuationRecord {
  id: string;
  organization_id: string;
  building_id: number;
  floor_ids: unknown;
  note: string | null;
  drill: boolean;
  started_at: Date | string;
  started_by: unknown;
  ended_at: Date | string | null;
  ended_by: unknown;
}

const evacuationOf = (row: EvacuationRecord): EvacuationRow => ({
  id: row.id,
  organizationId: row.organization_id,
  buildingId: Number(row.building_id),
  floorIds: json<number[] | null>(row.floor_ids),
  note: row.note,
  drill: row.drill,
  startedAt: new Date(row.started_at),
  startedBy: json<Actor>(row.started_by),
  endedAt: row.ended_at === null ? null : new Date(row.ended_at),
  endedBy: json<Actor | null>(row.ended_by),
});

interface EntryRecord {
  person_key: string;
  user_id: string | null;
  device_ids: unknown;
  arrival: boolean;
  status: RollStatus;
  status_at: Date | string;
  point_id: string | null;
  point_name: string | null;
  marked_by: unknown;
  comment: string | null;
  floor_id: number | null;
  x: number | null;
  y: number | null;
  lat: number | null;
  lng: number | null;
  fix_at: Date | string | null;
  seq: string | number;
}

const ENTRY_FIELDS = [
  'person_key',
  'user_id',
  'device_ids',
  'arrival',
  'status',
  'status_at',
  'point_id',
  'point_name',
  'marked_by',
  'comment',
  'floor_id',
  'x',
  'y',
  'lat',
  'lng',
  'fix_at',
  'seq',
] as const satisfies readonly (keyof EntryRecord)[];
const ENTRY_COLUMNS = ENTRY_FIELDS.join(', ');

const entryOf = (row: EntryRecord): StoredEntry => {
  const deviceIds = json<string[]>(row.device_ids);
  const fixAt = ms(row.fix_at);
  return {
    personKey: row.person_key,
    userId: row.user_id,
    deviceIds,
    arrival: row.arrival,
    status: row.status,
    statusAt: ms(row.status_at)!,
    pointId: row.point_id,
    pointName: row.point_name,
    markedBy: json<Actor | null>(row.marked_by),
    comment: row.comment,
    fix:
      fixAt === null
        ? null
        : {
            deviceId: deviceIds[0] ?? '',
            userId: row.user_id,
            buildingId: null,
            floorId: row.floor_id,
            x: row.x,
            y: row.y,
            lat: row.lat!,
            lng: row.lng!,
            at: fixAt,
          },
    seq: Number(row.seq),
  };
};

interface FixRecord extends StoredPlaceRow {
  device_id: string;
  user_id: string | null;
  ts: Date | string;
}

const fixOf = (row: FixRecord): Fix => ({
  deviceId: row.device_id,
  userId: row.user_id,
  buildingId: row.building_id === null ? null : Number(row.building_id),
  floorId: row.floor_id === null ? null : Number(row.floor_id),
  x: row.x,
  y: row.y,
  lat: row.lat,
  lng: row.lng,
  at: new Date(row.ts).getTime(),
});

/** Evacuations and their rolls in `evacuations` and `evacuation_roll` (migration m0023); every write binds its values. */
export class EvacuationStore {
  constructor(private readonly storage: Storage) {}

  /** Each device's newest fix in the building since `since`. */
  async recentInside(organizationId: string, buildingId: number, since: Date): Promise<Map<string, Fix>> {
    const rows = await this.storage.execute<FixRecord>(
      `select distinct on (device_id) device_id, user_id, building_id, floor_id, x, y, lat, lng, ts from positions
       where organization_id = ? and building_id = ? and ts >= ? order by device_id, ts desc`,
      [organizationId, buildingId, since],
    );
    return new Map(rows.map((row) => [row.device_id, fixOf(row)]));
  }

  /** Each device's newest fix anywhere since `since`, for the devices whose newest fix is in the building or who are listed. */
  async latest(organizationId: string, since: Date): Promise<Map<string, Fix>> {
    const rows = await this.storage.execute<FixRecord>(
      `select distinct on (device_id) device_id, user_id, building_id, floor_id, x, y, lat, lng, ts from positions
       where organization_id = ? and ts >= ? order by device_id, ts desc`,
      [organizationId, since],
    );
    return new Map(rows.map((row) => [row.device_id, fixOf(row)]));
  }

  /**
   * The newest stored fix of each of these devices since `since`: the last known place of the missing, whichever
   * gateway asks. One probe of positions_device_ts_idx per device, newest first (EXPLAIN in docs/api/evacuations.md),
   * so the cost follows the devices asked for, not the fixes they stored since `since`.
   */
  async latestOf(organizationId: string, deviceIds: readonly string[], since: Date): Promise<Map<string, Fix>> {
    if (deviceIds.length === 0) return new Map();
    const rows = await jsonRows<FixRecord>(
      this.storage,
      ['d.device_id', 'p.user_id', 'p.building_id', 'p.floor_id', 'p.x', 'p.y', 'p.lat', 'p.lng', 'p.ts'],
      `unnest(?::text[]) as d (device_id)
       cross join lateral (
         select user_id, building_id, floor_id, x, y, lat, lng, ts from positions
         where organization_id = ? and device_id = d.device_id and ts >= ? order by ts desc limit 1
       ) p`,
      [pgArray(deviceIds), organizationId, since],
    );
    return new Map(rows.map((row) => [row.device_id, fixOf(row)]));
  }

  async musterPoints(organizationId: string, buildingId: number): Promise<MusterPoint[]> {
    const rows = await this.storage.execute<{
      id: string;
      name: string;
      floor_id: number;
      type: 'POLYGON' | 'CIRCLE';
      cartesians: unknown;
      radius: number | null;
    }>(
      `select id, name, floor_id, type, cartesians, radius from geofences
       where organization_id = ? and building_id = ? and muster_point and not deleted order by name, id`,
      [organizationId, buildingId],
    );
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      floorId: Number(row.floor_id),
      type: row.type,
      cartesians: json(row.cartesians),
      radius: row.radius,
    }));
  }

  async active(organizationId: string, buildingId: number, on: Execute = this.storage): Promise<EvacuationRow | undefined> {
    const [row] = await run<EvacuationRecord>(
      on,
      'select * from evacuations where organization_id = ? and building_id = ? and ended_at is null',
      [organizationId, buildingId],
    );
    return row && evacuationOf(row);
  }

  /** Every active evacuation (each gateway keeps the list to match zone events against). */
  async allActive(): Promise<EvacuationRow[]> {
    return (await this.storage.execute<EvacuationRecord>('select * from evacuations where ended_at is null')).map(evacuationOf);
  }

  async find(organizationId: string, buildingId: number, id: string, on: Execute = this.storage): Promise<EvacuationRow | undefined> {
    const [row] = await run<EvacuationRecord>(on, 'select * from evacuations where organization_id = ? and building_id = ? and id = ?', [
      organizationId,
      buildingId,
      id,
    ]);
    return row && evacuationOf(row);
  }

  async insert(tx: EntityManager, evacuation: EvacuationRow, roll: readonly RollEntry[]): Promise<void> {
    const e = evacuation;
    await tx.execute(
      `insert into evacuations (id, organization_id, building_id, floor_ids, note, drill, started_at, started_by)
       values (?, ?, ?, ?::jsonb, ?, ?, ?, ?::jsonb)`,
      [e.id, e.organizationId, e.buildingId, JSON.stringify(e.floorIds), e.note, e.drill, e.startedAt, JSON.stringify(e.startedBy)],
    );
    for (let start = 0; start < roll.length; start += 500) await this.insertEntries(tx, e.id, roll.slice(start, start + 500));
  }

  private async insertEntries(tx: EntityManager, evacuationId: string, entries: readonly RollEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const params: unknown[] = [];
    const values = entries.map((entry) => {
      const fix = entry.fix;
      params.push(
        evacuationId,
        entry.personKey,
        entry.userId,
        JSON.stringify(entry.deviceIds),
        entry.arrival,
        entry.status,
        new Date(entry.statusAt),
      );
      params.push(
        entry.pointId,
        entry.pointName,
        fix?.floorId ?? null,
        fix?.x ?? null,
        fix?.y ?? null,
        fix?.lat ?? null,
        fix?.lng ?? null,
        fix ? new Date(fix.at) : null,
      );
      return '(?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';
    });
    await tx.execute(
      `insert into evacuation_roll (evacuation_id, person_key, user_id, device_ids, arrival, status, status_at, point_id, point_name,
       floor_id, x, y, lat, lng, fix_at) values ${values.join(', ')} on conflict do nothing`,
      params,
    );
  }

  /** Adds people who came into the building during the evacuation; returns those new to the roll. */
  async addArrivals(evacuationId: string, arrivals: readonly RollEntry[]): Promise<StoredEntry[]> {
    const keys = arrivals.map((entry) => entry.personKey);
    await this.storage.em().transactional((tx) => this.insertEntries(tx, evacuationId, arrivals));
    const rows = await this.storage.execute<EntryRecord>(
      `select ${ENTRY_COLUMNS} from evacuation_roll
       where evacuation_id = ? and arrival and person_key in (${keys.map(() => '?').join(', ')})`,
      [evacuationId, ...keys],
    );
    return rows.map(entryOf);
  }

  async roll(evacuationId: string, sinceSeq = 0, on: Execute = this.storage): Promise<StoredEntry[]> {
    const rows = await jsonRows<EntryRecord>(
      on,
      ENTRY_FIELDS,
      'evacuation_roll where evacuation_id = ? and seq > ?',
      [evacuationId, sinceSeq],
      'seq',
    );
    return rows.map(entryOf);
  }

  async entry(evacuationId: string, personKey: string, on: Execute = this.storage): Promise<StoredEntry | undefined> {
    const [row] = await run<EntryRecord>(on, `select ${ENTRY_COLUMNS} from evacuation_roll where evacuation_id = ? and person_key = ?`, [
      evacuationId,
      personKey,
    ]);
    return row && entryOf(row);
  }

  /** A person reached an assembly point: safe, unless marked already (by a warden or an earlier arrival). */
  async reachedPoint(
    tx: EntityManager,
    evacuationId: string,
    personKey: string,
    point: Pick<MusterPoint, 'id' | 'name'>,
    at: Date,
    fix: Fix | null,
  ): Promise<StoredEntry | undefined> {
    const [row] = await run<EntryRecord>(
      tx,
      `update evacuation_roll set status = 'safe', status_at = ?, point_id = ?, point_name = ?, seq = nextval('evacuation_roll_seq'),
         floor_id = coalesce(?, floor_id), x = coalesce(?, x), y = coalesce(?, y), lat = coalesce(?, lat), lng = coalesce(?, lng),
         fix_at = coalesce(?, fix_at)
       where evacuation_id = ? and person_key = ? and status in ('missing', 'left_site', 'not_found') and not arrival
       returning ${ENTRY_COLUMNS}`,
      [
        at,
        point.id,
        point.name,
        fix?.floorId ?? null,
        fix?.x ?? null,
        fix?.y ?? null,
        fix?.lat ?? null,
        fix?.lng ?? null,
        fix ? new Date(fix.at) : null,
        evacuationId,
        personKey,
      ],
    );
    return row && entryOf(row);
  }

  /** A warden marks a person safe; one already accounted as safe keeps how they were (undefined then). */
  async markSafe(
    tx: EntityManager,
    evacuationId: string,
    personKey: string,
    by: Actor,
    comment: string | null,
    at: Date,
  ): Promise<StoredEntry | undefined> {
    const [row] = (await tx.execute(
      `update evacuation_roll set status = 'safe_manual', status_at = ?, marked_by = ?::jsonb, comment = ?,
         seq = nextval('evacuation_roll_seq')
       where evacuation_id = ? and person_key = ? and status not in ('safe', 'safe_manual') returning ${ENTRY_COLUMNS}`,
      [at, JSON.stringify(by), comment, evacuationId, personKey],
    )) as EntryRecord[];
    return row && entryOf(row);
  }

  /** Ends the evacuation; whoever is still missing is settled `not_found`. Returns those entries. */
  async end(tx: EntityManager, evacuationId: string, by: Actor, at: Date): Promise<StoredEntry[]> {
    await tx.execute('update evacuations set ended_at = ?, ended_by = ?::jsonb where id = ? and ended_at is null', [
      at,
      JSON.stringify(by),
      evacuationId,
    ]);
    const rows = (await tx.execute(
      `update evacuation_roll set status = 'not_found', status_at = ?, seq = nextval('evacuation_roll_seq')
       where evacuation_id = ? and status = 'missing' and not arrival returning ${ENTRY_COLUMNS}`,
      [at, evacuationId],
    )) as EntryRecord[];
    return rows.map(entryOf).sort((a, b) => a.seq - b.seq);
  }
}
