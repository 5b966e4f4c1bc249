import { describe, expect, it } from 'vitest';
import { RetentionSweep } from '../../gateway/privacy/retention-sweep.js';
import { createLogger } from '../../shared/logger.js';
import type { RetentionDays } from '../../shared/privacy/retention.js';

const MAXIMA: RetentionDays = { positions: 30, zone_events: 30, stays_and_rollups: 30, alarm_positions: 30, audit: 90 };

/** Day partitions of positions the recording storage lists, from 23 to 28 November 2026 (28th: created ahead). */
const PARTITIONS = [
  'positions_p20261123',
  'positions_p20261124',
  'positions_p20261125',
  'positions_p20261126',
  'positions_p20261127',
  'positions_p20261128',
];

/**
 * A storage that answers one organization with its own periods and the partitions of positions, and records every
 * statement, each taking `delayMs`. A statement naming one of `dropped` fails, as on a partition dropped meanwhile.
 */
function recordingStorage(own: Partial<Record<string, number | null>>, delayMs = 5, partitions = PARTITIONS, dropped: string[] = []) {
  const statements: { text: string; params: unknown[] }[] = [];
  return {
    statements,
    execute: async <T>(text: string, params: unknown[] = []): Promise<T[]> => {
      statements.push({ text, params });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (text.includes('from organizations')) {
        return [
          { id: 'org-a', positions: null, zone_events: null, stays_and_rollups: null, alarm_positions: null, audit: null, ...own },
        ] as T[];
      }
      if (text.includes('pg_inherits')) return partitions.map((name) => ({ name })) as T[];
      if (text.includes('from pg_class where relname')) return (dropped.includes(params[0] as string) ? [] : [{ '?column?': 1 }]) as T[];
      const named = dropped.find((name) => text.includes(`from ${name} `));
      if (named) throw new Error(`relation "${named}" does not exist`);
      return [{ n: 0 }] as T[];
    },
    kind: 'embedded' as const,
  };
}

/** The relations the positions' deletes of a pass named, in order, and the parameters they had. */
const positionDeletes = (statements: { text: string; params: unknown[] }[]) =>
  statements
    .map((entry) => ({ table: /delete from (positions\w*) /.exec(entry.text)?.[1], params: entry.params }))
    .filter((entry): entry is { table: string; params: unknown[] } => entry.table !== undefined);

describe('the retention sweep', () => {
  it("deletes each kind past the organization's own period, else the deployment's maximum", async () => {
    const storage = recordingStorage({ positions: 2, audit: 7 });
    const now = Date.UTC(2026, 10, 27, 12);
    await new RetentionSweep(storage, MAXIMA, createLogger('silent')).sweep(now);
    const cutoffOf = (table: string) => {
      const statement = storage.statements.find((entry) => entry.text.includes(`delete from ${table} `));
      return (statement?.params[1] as Date | undefined)?.toISOString();
    };
    const daysBack = (days: number) => new Date(now - days * 86_400_000).toISOString();
    expect(cutoffOf('positions_p20261123')).toBe(daysBack(2));
    expect(cutoffOf('zone_events')).toBe(daysBack(30));
    expect(cutoffOf('rollup_runs')).toBe(daysBack(30));
    expect(cutoffOf('audit_log')).toBe(daysBack(7));
    expect(storage.statements.some((entry) => entry.text.includes('update alarms'))).toBe(true);
    // Every delete is bounded: no statement deletes without a limit.
    for (const entry of storage.statements.filter((statement) => statement.text.includes('delete from')))
      expect(entry.text).toMatch(/limit \d+/);
  });

  it('deletes positions from each day partition by name, never through the parent, and only from days before the cutoff', async () => {
    // Positions kept 2 days at noon on the 27th: the cutoff is noon on the 25th, inside that day's partition.
    const storage = recordingStorage({ positions: 2 }, 0, ['positions_default', ...PARTITIONS]);
    const now = Date.UTC(2026, 10, 27, 12);
    await new RetentionSweep(storage, MAXIMA, createLogger('silent')).sweep(now);
    const deletes = positionDeletes(storage.statements);
    // A partition not named by day (an operator's default partition) may hold anything: it is visited too.
    expect(deletes.map((entry) => entry.table)).toEqual([
      'positions_default',
      'positions_p20261123',
      'positions_p20261124',
      'positions_p20261125',
    ]);
    for (const entry of deletes) {
      expect(entry.params).toEqual(['org-a', new Date(Date.UTC(2026, 10, 25, 12))]);
      // The partition is named in the delete and in the bounded select it deletes from: no statement reads the parent.
      expect(storage.statements.find((statement) => statement.params === entry.params)!.text).not.toMatch(/\bpositions\b(?!_)/);
    }
  });

  it('passes over the partition that starts at the cutoff, which holds nothing older', async () => {
    // Kept 3 days at midnight starting the 27th: the cutoff is midnight starting the 24th, a partition boundary.
    const storage = recordingStorage({ positions: 3 }, 0);
    await new RetentionSweep(storage, MAXIMA, createLogger('silent')).sweep(Date.UTC(2026, 10, 27));
    expect(positionDeletes(storage.statements).map((entry) => entry.table)).toEqual(['positions_p20261123']);
  });

  it('passes over a partition dropped since it was listed, and expires the rest', async () => {
    const storage = recordingStorage({ positions: 2 }, 0, PARTITIONS, ['positions_p20261123']);
    const warned: string[] = [];
    const logger = createLogger('warn', {}, { destination: { write: (line: string) => void warned.push(line) } });
    await new RetentionSweep(storage, MAXIMA, logger).sweep(Date.UTC(2026, 10, 27, 12));
    expect(positionDeletes(storage.statements).map((entry) => entry.table)).toEqual([
      'positions_p20261123',
      'positions_p20261124',
      'positions_p20261125',
    ]);
    expect(storage.statements.some((entry) => entry.text.includes('delete from audit_log'))).toBe(true);
    expect(warned).toEqual([]);
  });

  it('joins a pass under way instead of starting a second, and stop waits for it', async () => {
    const storage = recordingStorage({});
    const sweep = new RetentionSweep(storage, MAXIMA, createLogger('silent'));
    const first = sweep.sweep();
    const second = sweep.sweep();
    expect(second).toBe(first);
    await sweep.stop();
    const passes = storage.statements.filter((entry) => entry.text.includes('from organizations')).length;
    expect(passes).toBe(1);
  });
});
