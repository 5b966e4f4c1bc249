import { describe, expect, it } from 'vitest';
import { csvChunks } from '../../shared/csv/csv.js';
import { renderedBody, renderReport, rowObjects } from '../../shared/reports/report-output.js';
import { deflateRawSync } from 'node:zlib';
import type { ReportColumn } from '../../shared/reports/report-params.js';

const meta: ReportColumn[] = [
  { name: 'timestamp', type: 'datetime', nullable: false },
  { name: 'device_id', type: 'string', nullable: false },
  { name: 'n', type: 'number', nullable: true },
  { name: 'ok', type: 'boolean', nullable: true },
  { name: 'odd "name"\n', type: 'string', nullable: true },
  { name: '7', type: 'integer', nullable: true },
];
// What JSON treats specially: quotes, backslashes, control characters, lone surrogates, astral characters;
// -0, non-finite numbers, exponents; null and undefined (JSON leaves the key out); a Date, nested values,
// functions and symbols (left out); a row shorter than the columns.
const rows: unknown[][] = [
  ['2026-01-15T00:00:00Z', 'plain', 1.5, true, 'x', 1],
  ['2026-01-15T00:00:01Z', 'quo"te\\back\u0001\n\r\t', -0, false, null, 2],
  ['2026-01-15 01:00:02', '\ud800 lone, \u{1f600} astral, \u2028', Number.NaN, null, '=1+2', 3],
  [undefined, '-cmd', Number.POSITIVE_INFINITY, undefined, '@x', undefined],
  ['t', 'e', 1e21, true, undefined, 1e-7],
  [new Date(Date.UTC(2026, 0, 1)), { a: [1, 'b'] }, () => 1, Symbol('s'), [undefined], 5e-324],
  ['short row'],
];

describe('rowObjects: the objects of a JSON report, as Object.fromEntries keyed them', () => {
  it('serialise to the same bytes, keys in column order (an integer-like name first, as in any object)', () => {
    const reference = rows.map((row) => Object.fromEntries(meta.map((column, i) => [column.name, row[i]])));
    const objects = rowObjects(meta, rows);
    expect(JSON.stringify({ data: objects })).toBe(JSON.stringify({ data: reference }));
    expect(objects.map((object) => Object.keys(object))).toEqual(reference.map((object) => Object.keys(object)));
    expect(rowObjects(meta, [])).toEqual([]);
  });
});

describe('renderReport: the answer a report job hands back, as the route wrote it from rows', () => {
  const csvRows = rows.slice(0, 5) as never;
  const statistics = { rows_read: 7, rows_returned: 5, elapsed_ms: 1.25 };
  it('JSON and CSV, deflated (through Redis) or not: the same bytes', async () => {
    let csv = '';
    for await (const chunk of csvChunks(
      meta.map((column) => column.name),
      [csvRows],
    ))
      csv += chunk;
    const json = JSON.stringify({ data: rowObjects(meta, rows), meta, statistics });
    for (const deflate of [false, true]) {
      // Through BullMQ's JSON and back, as a result travels.
      const trip = async (format: 'json' | 'csv', result: { meta: ReportColumn[]; rows: unknown[][] }) =>
        JSON.parse(JSON.stringify(await renderReport({ ...result, statistics }, { format, deflate })));
      const jsonAnswer = await trip('json', { meta, rows });
      expect(jsonAnswer.statistics).toEqual(statistics);
      expect(Buffer.from(await renderedBody(jsonAnswer)).toString('utf8')).toBe(json);
      const csvAnswer = await trip('csv', { meta, rows: csvRows });
      expect(Buffer.from(await renderedBody(csvAnswer)).equals(Buffer.from(csv, 'utf8'))).toBe(true);
      expect(csvAnswer.deflated).toBe(deflate);
    }
  });

  it('refuses to inflate an answer past its cap (a small deflated bomb through Redis), and inflates one within it', async () => {
    const bomb = deflateRawSync(Buffer.alloc(10 * 1024 * 1024), { level: 9 }); // 10 MB of zeros in about 10 KB
    const rendered = { format: 'json' as const, statistics, body: bomb.toString('base64'), deflated: true };
    await expect(renderedBody(rendered, 1024 * 1024)).rejects.toThrow(/inflates past 1048576 bytes/);
    expect((await renderedBody(rendered, 16 * 1024 * 1024)).length).toBe(10 * 1024 * 1024);
  });
});
