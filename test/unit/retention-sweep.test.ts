import { describe, expect, it } from 'vitest';
import { RetentionSweep } from '../../gateway/privacy/retention-sweep.js';
import { createLogger } from '../../shared/logger.js';
import type { RetentionDays } from '../../shared/privacy/retention.js';

const MAXIMA: RetentionDays = { positions: 30, zone_events: 30, stays_and_rollups: 30, alarm_positions: 30, audit: 90 };

/** A storage that answers one organization with its own periods and records every statement, each taking `delayMs`. */
function recordingStorage(own: Partial<Record<string, number | null>>, delayMs = 5) {
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
      return [{ n: 0 }] as T[];
    },
  };
}

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
    expect(cutoffOf('positions')).toBe(daysBack(2));
    expect(cutoffOf('zone_events')).toBe(daysBack(30));
    expect(cutoffOf('rollup_runs')).toBe(daysBack(30));
    expect(cutoffOf('audit_log')).toBe(daysBack(7));
    expect(storage.statements.some((entry) => entry.text.includes('update alarms'))).toBe(true);
    // Every delete is bounded: no statement deletes without a limit.
    for (const entry of storage.statements.filter((statement) => statement.text.includes('delete from')))
      expect(entry.text).toMatch(/limit \d+/);
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
