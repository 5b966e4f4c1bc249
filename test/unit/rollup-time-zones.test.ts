import { describe, expect, it } from 'vitest';
import { ROLLUPS_SINCE } from '../../shared/reports/rollups.js';

const formats = new Map<string, Intl.DateTimeFormat>();
/** A zone's offset from UTC at `ms`, in minutes, from the tz data Intl carries. */
function offsetMinutes(zone: string, ms: number): number {
  let format = formats.get(zone);
  if (!format) formats.set(zone, (format = new Intl.DateTimeFormat('en-US', { timeZone: zone, timeZoneName: 'longOffset' })));
  const match = /GMT(?:([+-])(\d\d):(\d\d)(?::(\d\d))?)?$/.exec(format.format(ms))!;
  if (!match[1]) return 0;
  const minutes = Number(match[2]) * 60 + Number(match[3]) + Number(match[4] ?? 0) / 60;
  return match[1] === '-' ? -minutes : minutes;
}

/**
 * The rule the rollups and the visitors' quarters rely on, checked over every zone Intl knows, from 1980 to
 * 2040: every offset is a whole number of quarter hours. The changes found are located to the second; those
 * off a quarter hour (where a UTC quarter lies in two local hours) must be among the zones the visitors report
 * handles for it. A sample every 4 weeks (a full weekly scan, 48 s, found the same zones).
 */
describe('time zones since 1980', () => {
  it('have offsets of whole quarter hours, changed on a quarter hour but in a few known zones', () => {
    const step = 28 * 86_400_000;
    const end = Date.UTC(2040, 0, 1);
    const offQuarter = new Set<string>();
    const odd: string[] = [];
    for (const zone of Intl.supportedValuesOf('timeZone')) {
      let previous = offsetMinutes(zone, ROLLUPS_SINCE);
      if (previous % 15 !== 0) odd.push(`${zone} ${previous}`);
      for (let t = ROLLUPS_SINCE + step; t <= end; t += step) {
        const offset = offsetMinutes(zone, t);
        if (offset === previous) continue;
        if (offset % 15 !== 0) odd.push(`${zone} ${offset} at ${new Date(t).toISOString()}`);
        let [before, after] = [t - step, t];
        while (after - before > 1000) {
          const middle = before + Math.floor((after - before) / 2000) * 1000;
          if (offsetMinutes(zone, middle) === previous) before = middle;
          else after = middle;
        }
        if (after % (15 * 60_000) !== 0) offQuarter.add(zone);
        previous = offset;
      }
    }
    expect(odd).toEqual([]);
    for (const zone of offQuarter)
      expect(['America/Goose_Bay', 'America/St_Johns', 'America/Moncton', 'Asia/Gaza', 'Asia/Hebron', 'Antarctica/Casey']).toContain(zone);
    expect(offQuarter.has('America/Goose_Bay')).toBe(true);
  }, 120_000);
});
