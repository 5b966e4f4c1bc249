/**
 * The evacuation view's state, as plain data and pure functions (no DOM, no clock): the roll as the
 * `buildings/{id}/evacuation` topic and `GET .../evacuations/{id}` give it (docs/api/evacuations.md), merged by
 * each entry's seq, its counts, the missing ordered for rescuers and what each assembly point has gathered.
 */

export type RollStatus = 'missing' | 'safe' | 'safe_manual' | 'left_site' | 'not_found';

export interface Actor {
  user_id: string;
  email: string;
}

export interface LastPosition {
  floor_id: number | null;
  x: number | null;
  y: number | null;
  lat: number;
  lng: number;
  fix_at: string;
}

export interface RollEntry {
  entry: string;
  user_id: string | null;
  device_ids: string[];
  arrival: boolean;
  status: RollStatus;
  status_at: string;
  assembly_point: { id: string; name: string } | null;
  marked_by: Actor | null;
  comment: string | null;
  last_position: LastPosition | null;
  seq: number;
}

export interface EvacuationSummary {
  id: string;
  building_id: number;
  floor_ids: number[] | null;
  note: string | null;
  drill: boolean;
  active: boolean;
  started_at: string;
  started_by: Actor;
  ended_at: string | null;
  ended_by: Actor | null;
}

/** GET /api/v1/buildings/:id/evacuations/:evacuation */
export interface EvacuationDetail extends EvacuationSummary {
  missing: RollEntry[];
  roll: RollEntry[];
  arrivals: RollEntry[];
}

/** One frame of the topic: started and ended carry the summary, entry one roll entry as it now stands. */
export interface EvacuationChange {
  kind: 'started' | 'ended' | 'entry';
  evacuation_id: string;
  building_id: number;
  evacuation?: EvacuationSummary;
  seq?: number;
  entry?: RollEntry;
}

/** An assembly point as the building's detail lists it (a geofence with `muster_point`). */
export interface AssemblyPoint {
  id: string;
  name: string;
  type: 'POLYGON' | 'CIRCLE' | 'POINT' | 'LINE';
  cartesians: [number, number][];
  radius: number | null;
  floor_id: number;
  muster_point?: boolean;
}

export interface RollCounts {
  on_roll: number;
  missing: number;
  /** Reached an assembly point, or marked safe by a warden. */
  safe: number;
  safe_manual: number;
  left_site: number;
  not_found: number;
  arrivals: number;
}

const fixTime = (entry: RollEntry) => (entry.last_position ? Date.parse(entry.last_position.fix_at) : Number.NaN);

/** The newer of two last positions (by fix time). */
function newerFix(a: LastPosition | null, b: LastPosition | null): LastPosition | null {
  if (!a) return b;
  if (!b) return a;
  return Date.parse(b.fix_at) > Date.parse(a.fix_at) ? b : a;
}

/**
 * The roll of one evacuation. Entries are taken by seq (a replayed or fetched copy never undoes a newer change);
 * a last position is kept whenever it is newer, whoever brought it (the roll, the GET, the live positions).
 */
export class MusterRoll {
  private readonly entries = new Map<string, RollEntry>();
  private readonly byDevice = new Map<string, string>();
  /** The highest seq seen: what a resubscription resumes after. */
  maxSeq = 0;

  constructor(public evacuation: EvacuationSummary) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: string): RollEntry | undefined {
    return this.entries.get(key);
  }

  all(): IterableIterator<RollEntry> {
    return this.entries.values();
  }

  /** Takes an entry unless a newer change of it is held already; answers whether anything changed. */
  apply(entry: RollEntry): boolean {
    this.maxSeq = Math.max(this.maxSeq, entry.seq);
    const held = this.entries.get(entry.entry);
    if (held && held.seq > entry.seq) {
      const fix = newerFix(held.last_position, entry.last_position);
      if (fix === held.last_position) return false;
      this.entries.set(entry.entry, { ...held, last_position: fix });
      return true;
    }
    const merged = held ? { ...entry, last_position: newerFix(held.last_position, entry.last_position) } : entry;
    this.entries.set(entry.entry, merged);
    for (const device of entry.device_ids) this.byDevice.set(device, entry.entry);
    return true;
  }

  /** A live position of a device on the roll: the person's last known place, if newer. Answers the entry it moved. */
  position(deviceId: string, position: LastPosition): RollEntry | undefined {
    const key = this.byDevice.get(deviceId);
    const held = key === undefined ? undefined : this.entries.get(key);
    if (!held) return undefined;
    const fix = newerFix(held.last_position, position);
    if (fix === held.last_position) return undefined;
    const moved = { ...held, last_position: fix };
    this.entries.set(held.entry, moved);
    return moved;
  }

  counts(): RollCounts {
    const counts: RollCounts = { on_roll: 0, missing: 0, safe: 0, safe_manual: 0, left_site: 0, not_found: 0, arrivals: 0 };
    for (const entry of this.entries.values()) {
      if (entry.arrival) {
        counts.arrivals++;
        continue;
      }
      counts.on_roll++;
      if (entry.status === 'safe' || entry.status === 'safe_manual') counts.safe++;
      if (entry.status !== 'safe') counts[entry.status]++;
    }
    return counts;
  }

  /** Who rescuers look for: still missing (not found, once ended), arrivals never. */
  unaccounted(): RollEntry[] {
    return [...this.entries.values()].filter((entry) => !entry.arrival && (entry.status === 'missing' || entry.status === 'not_found'));
  }

  /** People who reached each assembly point (by id). */
  pointCounts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const entry of this.entries.values()) {
      if (entry.status === 'safe' && entry.assembly_point)
        counts.set(entry.assembly_point.id, (counts.get(entry.assembly_point.id) ?? 0) + 1);
    }
    return counts;
  }

  /** The last `limit` people accounted for (safe either way), newest first. */
  recentlyAccounted(limit: number): RollEntry[] {
    return [...this.entries.values()]
      .filter((entry) => !entry.arrival && (entry.status === 'safe' || entry.status === 'safe_manual'))
      .sort((a, b) => Date.parse(b.status_at) - Date.parse(a.status_at) || b.seq - a.seq)
      .slice(0, limit);
  }
}

export interface FloorGroup {
  /** null: people with no known floor. */
  floorId: number | null;
  entries: RollEntry[];
}

/**
 * The missing by floor, as the gateway orders them for rescuers: floors by level (lowest first; unknown floors,
 * then no floor, last), within a floor the oldest fix first (the longest unseen), then by entry.
 */
export function missingByFloor(missing: readonly RollEntry[], levelOf: (floorId: number) => number | undefined): FloorGroup[] {
  const level = (floorId: number | null) => (floorId === null ? Number.POSITIVE_INFINITY : (levelOf(floorId) ?? Number.MAX_VALUE));
  const groups = new Map<number | null, RollEntry[]>();
  for (const entry of missing) {
    const floorId = entry.last_position?.floor_id ?? null;
    const group = groups.get(floorId);
    if (group) group.push(entry);
    else groups.set(floorId, [entry]);
  }
  const byFix = (a: RollEntry, b: RollEntry) =>
    (fixTime(a) || 0) - (fixTime(b) || 0) || (a.entry < b.entry ? -1 : a.entry > b.entry ? 1 : 0);
  return [...groups.entries()]
    .sort(([a], [b]) => level(a) - level(b) || (a ?? 0) - (b ?? 0))
    .map(([floorId, entries]) => ({ floorId, entries: entries.sort(byFix) }));
}

/** Elapsed time as a clock: "4:05", "1:02:09". */
export function clock(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const pad = (n: number) => String(n).padStart(2, '0');
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

/** How a person is named on the roll: their name (when the console knows it), else the device or a short user id. */
export function personLabel(entry: Pick<RollEntry, 'entry' | 'user_id'>, userName: (userId: string) => string | null): string {
  if (entry.user_id) return userName(entry.user_id) ?? `user ${entry.user_id.slice(0, 8)}`;
  return entry.entry.replace(/^device:/, '');
}
