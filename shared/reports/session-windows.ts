import { pgArray } from '../storage/pg-array.js';
import { intervalMicros, joinSql, sqlOf, type Sql } from './report-sql.js';

/**
 * Sessions without sorting positions. A session (of a device, or of a device in a geofence: a "key") is a
 * maximal run of its positions with consecutive gaps of at most the threshold. Sorting every position for
 * window functions runs in one process and spills; instead one parallel aggregation groups positions per key
 * and time window, each window recording its first and last position, a count, and which of its 64 slots hold
 * a position (`bit_or`). A slot spans half the threshold, so positions in the same or adjacent slots are
 * never more than the threshold apart: a window whose occupied slots are all adjacent is one piece of a
 * session, and consecutive windows join when the gap from one's last position to the next one's first is
 * within the threshold. Only a window with a hole (a device that left and came back within the window) is
 * read again, position by position. Times are µs after `origin`.
 */
export class SessionWindows {
  /** The threshold in µs, rounded as make_interval rounds it, capped at the report's span (the same splits). */
  readonly thresholdUs: number;
  readonly slotUs: number;
  readonly windowUs: number;
  /** Empty slots a gap may span and still be within the threshold (-1: not even adjacent slots are). */
  private readonly maxEmpty: number;

  constructor(
    thresholdSeconds: number,
    readonly origin: string,
    spanUs: number,
  ) {
    this.thresholdUs = Math.min(intervalMicros(thresholdSeconds), spanUs);
    // Positions in slots d apart are at most (d + 1) slots - 1 µs apart: adjacent ones fit when 2 slots - 1 µs <= threshold.
    this.slotUs = Math.max(1, Math.floor((this.thresholdUs + 1) / 2));
    this.windowUs = 64 * this.slotUs;
    this.maxEmpty = Math.floor((this.thresholdUs + 1) / this.slotUs) - 2;
  }

  /** The window of position `p` (a grouping key). */
  get window(): Sql {
    return sqlOf('date_bin(make_interval(secs => ?), p.ts, ?::timestamptz)', this.windowUs / 1e6, this.origin);
  }

  /** µs from `origin` to `column` (exact: numeric; for a window's first and last, or re-read positions). */
  offset(column: string): Sql {
    return sqlOf(`(extract(epoch from ${column} - ?::timestamptz) * 1000000)::int8`, this.origin);
  }

  /** A window's aggregates. Slots are counted from the window's start, where float µs are exact. */
  get aggregates(): Sql {
    const slot = joinSql(["((date_part('epoch', p.ts - ", this.window, sqlOf(') * 1000000::float8)::int8 / ?)::int', this.slotUs)]);
    return joinSql([
      'bit_or(1::int8 << ',
      slot,
      ')::text as bits, ',
      this.offset('min(p.ts)'),
      ' as first_us, ',
      this.offset('max(p.ts)'),
      ' as last_us, count(*)::int as n',
    ]);
  }

  /** Reads positions again in some windows: `select` (columns of `p`), joined to the (device, window) pairs, `where`, by time. */
  reread(select: Sql, where: Sql, wanted: { device: string; index: number }[]): Sql {
    return joinSql([
      'select ',
      select,
      ', ',
      this.offset('p.ts'),
      sqlOf(
        ' as t from unnest(?::text[], ?::int8[]) as w(device_id, start_us)',
        pgArray(wanted.map((w) => w.device)),
        pgArray(wanted.map((w) => w.index * this.windowUs)),
      ),
      sqlOf(
        " join positions p on p.device_id = w.device_id and p.ts >= ?::timestamptz + w.start_us * interval '1 microsecond'",
        this.origin,
      ),
      sqlOf(" and p.ts < ?::timestamptz + (w.start_us + ?) * interval '1 microsecond' where ", this.origin, this.windowUs),
      where,
      ' order by p.ts',
    ]);
  }

  /** Whether no gap inside a window can exceed the threshold: bridging gaps of up to `maxEmpty` empty slots leaves one run. */
  private isWhole(bits: bigint): boolean {
    if (this.maxEmpty < 0 || bits === 0n) return (bits & (bits - 1n)) === 0n;
    let run = bits;
    for (let shift = 1; shift <= this.maxEmpty; shift++) run |= bits >> BigInt(shift);
    run /= run & -run; // drop the empty slots below the first occupied one
    return (run & (run + 1n)) === 0n;
  }

  /**
   * Sessions per key. `windows` are level one's, merged per key and window; `reread` answers the positions of
   * the holed ones (by device and window index), keyed `key \0 window index`, in time order.
   */
  async sessions(
    windows: Iterable<Window>,
    reread: (wanted: { device: string; index: number }[]) => Promise<Map<string, Position[]>>,
  ): Promise<Map<string, Run[]>> {
    const byKey = new Map<string, Window[]>();
    const holed = new Map<string, { device: string; index: number }>();
    for (const window of windows) {
      pushTo(byKey, window.key, window);
      window.whole = this.isWhole(window.bits);
      if (!window.whole) holed.set(`${window.device}\u0000${window.index}`, { device: window.device, index: window.index });
    }
    const exact = holed.size > 0 ? await reread([...holed.values()]) : new Map<string, Position[]>();
    const sessions = new Map<string, Run[]>();
    for (const [key, list] of byKey) {
      list.sort((a, b) => a.index - b.index);
      const runs = list.flatMap((window) => (window.whole ? [window] : this.runsOf(exact.get(`${key}\u0000${window.index}`) ?? [])));
      sessions.set(key, this.join(runs));
    }
    return sessions;
  }

  /** Exact runs of time-ordered positions. */
  private runsOf(positions: Position[]): Run[] {
    return this.join(positions.map(({ t, user }) => ({ first: t, last: t, n: 1, user })));
  }

  /** Joins time-ordered runs wherever the gap between them is within the threshold. */
  private join(runs: Run[]): Run[] {
    const joined: Run[] = [];
    for (const run of runs) {
      const last = joined[joined.length - 1];
      if (last && run.first - last.last <= this.thresholdUs) {
        last.last = Math.max(last.last, run.last);
        last.n += run.n;
        last.user = maxUser(last.user, run.user);
      } else joined.push({ first: run.first, last: run.last, n: run.n, user: run.user });
    }
    return joined;
  }
}

export interface Position {
  t: number;
  user: string | null;
}

/** Positions from `first` to `last` (µs after the origin), how many, and the greatest user id (as max(user_id::text)). */
export interface Run {
  first: number;
  last: number;
  n: number;
  user: string | null;
}
const maxUser = (a: string | null, b: string | null) => (a === null ? b : b === null || a >= b ? a : b);

export function pushTo<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** One window of one key (level one's rows of several users of a key and window merge into it). */
export interface Window extends Run {
  device: string;
  key: string;
  index: number;
  bits: bigint;
  whole?: boolean;
}

/** A row of level one: occupied slots (int8 as text), first and last position (µs after the origin), count. */
export interface WindowRow {
  device_id: string;
  user_id?: string | null;
  bits: string;
  first_us: string;
  last_us: string;
  n: number;
  [column: string]: unknown;
}

export function addWindow(windows: Map<string, Window>, timing: SessionWindows, key: string, row: WindowRow): void {
  const first = Number(row.first_us);
  const index = Math.floor(first / timing.windowUs);
  const id = `${key}\u0000${index}`;
  const bits = BigInt.asUintN(64, BigInt(row.bits));
  const last = Number(row.last_us);
  const user = row.user_id ?? null;
  const window = windows.get(id);
  if (!window) windows.set(id, { device: row.device_id, key, index, bits, first, last, n: row.n, user });
  else {
    window.bits |= bits;
    window.first = Math.min(window.first, first);
    window.last = Math.max(window.last, last);
    window.n += row.n;
    window.user = maxUser(window.user, user);
  }
}
