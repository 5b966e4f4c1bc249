import { createHmac, randomBytes } from 'node:crypto';
import type { ReportName } from './report-params.js';

/**
 * Pseudonymous analytics (issue 32). A report asked with `pseudonymize=true` names no one: each user and device id
 * becomes a pseudonym, an HMAC of the id under a key drawn for this one report and then forgotten (never stored, never
 * sent), so one person keeps one pseudonym across the rows of a report but two reports cannot be joined on it, and
 * nobody holding the report can turn a pseudonym back into an id. Place-based reports also drop every cell seen by
 * fewer than `minPeople` distinct people: an hour of a room that one person visited is that person's whereabouts.
 */
export const DEFAULT_MIN_PEOPLE = 5;

/** The reports about places: their cells are suppressed under the minimum group size. */
export const PLACE_REPORTS: readonly ReportName[] = ['visitors', 'heatmap', 'positioning_time', 'geofencing_stay_time'];

interface Rows {
  meta: { name: string }[];
  rows: unknown[][];
  people?: number[];
}

const ID_COLUMNS: Record<string, string> = { user_id: 'u', device_id: 'd' };

/** The report's rows with ids replaced and thin cells dropped; `key` only for tests (a fresh random key otherwise). */
export function pseudonymizeRows(report: ReportName, result: Rows, minPeople: number, key: Buffer = randomBytes(32)): unknown[][] {
  const column = (name: string) => result.meta.findIndex((entry) => entry.name === name);
  const kept = PLACE_REPORTS.includes(report) ? suppressed(report, result, minPeople, column) : result.rows;
  const idColumns = Object.entries(ID_COLUMNS)
    .map(([name, prefix]) => ({ at: column(name), prefix }))
    .filter((entry) => entry.at >= 0);
  if (idColumns.length === 0) return kept;
  const pseudonym = pseudonymizer(key);
  return kept.map((row) => {
    const copy = [...row];
    for (const { at, prefix } of idColumns) copy[at] = pseudonym(prefix, copy[at]);
    return copy;
  });
}

/**
 * Pseudonyms under one key: `d-` or `u-` (the prefix) and 20 hex digits of HMAC-SHA256(key, prefix:id). The key is
 * fresh and random unless given (tests), and lives only as long as the function: nothing stores it.
 */
export function pseudonymizer(key: Buffer = randomBytes(32)): <T>(prefix: 'u' | 'd' | string, value: T) => T | string {
  const cache = new Map<string, string>();
  return (prefix, value) => {
    if (value === null || value === undefined) return value;
    const id = `${prefix}:${String(value)}`;
    let named = cache.get(id);
    if (named === undefined) {
      named = `${prefix}-${createHmac('sha256', key).update(id).digest('hex').slice(0, 20)}`;
      cache.set(id, named);
    }
    return named;
  };
}

/** Rows of cells with at least `minPeople` distinct people; how many people a row holds depends on the report. */
function suppressed(report: ReportName, result: Rows, minPeople: number, column: (name: string) => number): unknown[][] {
  const { rows } = result;
  switch (report) {
    case 'visitors': {
      // Distinct users, or devices without one: people already.
      const at = column('visitors');
      return rows.filter((row) => Number(row[at]) >= minPeople);
    }
    case 'heatmap': {
      // The weight is the distinct users (or devices without one) seen in the cell.
      const at = column('weight');
      return rows.filter((row) => Number(row[at]) >= minPeople);
    }
    case 'positioning_time': {
      // Rows count devices; the query counts the people behind them (a person with two phones is one).
      const people = result.people;
      if (!people) throw new Error('positioning_time gave no people counts: cannot check its minimum group size');
      return rows.filter((_, index) => (people[index] ?? 0) >= minPeople);
    }
    case 'geofencing_stay_time': {
      // One row per device, fence and period: a cell is a fence in a period, kept whole or dropped whole.
      const [group, fence, user, device] = ['group', 'geofence_id', 'user_id', 'device_id'].map(column) as [number, number, number, number];
      const cells = new Map<string, Set<string>>();
      const cellOf = (row: unknown[]) => `${String(row[group])}\u0000${String(row[fence])}`;
      for (const row of rows) {
        const key = cellOf(row);
        let people = cells.get(key);
        if (!people) cells.set(key, (people = new Set()));
        people.add(row[user] !== null && row[user] !== undefined ? `user:${String(row[user])}` : `device:${String(row[device])}`);
      }
      return rows.filter((row) => cells.get(cellOf(row))!.size >= minPeople);
    }
    default:
      return rows;
  }
}
