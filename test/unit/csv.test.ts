import { describe, expect, it } from 'vitest';
import { csvCell, csvChunks, csvRow, neutraliseFormula, quoteField } from '../../shared/csv/csv.js';
import { parseCsv } from '../../testkit/csv.js';

const collect = async (chunks: AsyncIterable<string>) => {
  const out: string[] = [];
  for await (const chunk of chunks) out.push(chunk);
  return out;
};

describe('CSV helpers', () => {
  it('quotes fields holding a comma, a quote, CR or LF, doubling the quotes (RFC 4180)', () => {
    expect(quoteField('plain text')).toBe('plain text');
    expect(quoteField('a,b')).toBe('"a,b"');
    expect(quoteField('say "hi"')).toBe('"say ""hi"""');
    expect(quoteField('two\nlines')).toBe('"two\nlines"');
    expect(quoteField('carriage\rreturn')).toBe('"carriage\rreturn"');
    expect(quoteField('')).toBe('');
  });

  it('puts an apostrophe before text a spreadsheet would run as a formula', () => {
    for (const start of ['=', '+', '-', '@', '\t', '\r']) expect(neutraliseFormula(`${start}x`)).toBe(`'${start}x`);
    expect(neutraliseFormula('=cmd()')).toBe("'=cmd()");
    expect(neutraliseFormula('a=b')).toBe('a=b');
    expect(neutraliseFormula("'quoted")).toBe("'quoted");
    expect(neutraliseFormula(' =spaced')).toBe(' =spaced');
  });

  it('writes cells by type: numbers as numbers (negative ones too), booleans, empties, neutralised then quoted text', () => {
    expect(csvCell(-3.25)).toBe('-3.25');
    expect(csvCell(0)).toBe('0');
    expect(csvCell(Number.NaN)).toBe('');
    expect(csvCell(Number.POSITIVE_INFINITY)).toBe('');
    expect(csvCell(true)).toBe('true');
    expect(csvCell(false)).toBe('false');
    expect(csvCell(null)).toBe('');
    expect(csvCell(undefined)).toBe('');
    expect(csvCell('-3.25')).toBe("'-3.25");
    expect(csvCell('=HYPERLINK("http://x","y")')).toBe(`"'=HYPERLINK(""http://x"",""y"")"`);
    expect(csvCell('@SUM(A1:A2),x')).toBe(`"'@SUM(A1:A2),x"`);
    expect(csvCell('\r=1')).toBe(`"'\r=1"`);
  });

  it('ends each record with CRLF and reads back as written', () => {
    const row = csvRow(['tag,1', 'he said "no"', 'line\nbreak', 12.5, null, true, '=cmd()']);
    expect(row.endsWith('\r\n')).toBe(true);
    expect(parseCsv(row)).toEqual([['tag,1', 'he said "no"', 'line\nbreak', '12.5', '', 'true', "'=cmd()"]]);
  });

  it('streams the header then every row, in order, in chunks of about the size asked', async () => {
    async function* batches() {
      for (let page = 0; page < 5; page++) yield Array.from({ length: 100 }, (_, i) => [`dev-${page * 100 + i}`, page * 100 + i] as const);
    }
    const chunks = await collect(csvChunks(['device', 'n'], batches(), 1024));
    expect(chunks.length).toBeGreaterThan(5);
    for (const chunk of chunks.slice(0, -1)) expect(chunk.length).toBeLessThan(1024 + 64);
    const records = parseCsv(chunks.join(''));
    expect(records[0]).toEqual(['device', 'n']);
    expect(records.slice(1)).toEqual(Array.from({ length: 500 }, (_, i) => [`dev-${i}`, String(i)]));
  });

  it('reads no batch before the consumer asks for more (the export relies on it for flat memory)', async () => {
    let produced = 0;
    async function* batches() {
      for (let page = 0; page < 10; page++) {
        produced++;
        yield [[`x`.repeat(2000)]];
      }
    }
    const iterator = csvChunks(['a'], batches(), 1000)[Symbol.asyncIterator]();
    await iterator.next();
    expect(produced).toBe(1);
    await iterator.next();
    expect(produced).toBe(2);
  });

  it('gives just the header for no rows', async () => {
    expect(await collect(csvChunks(['a', 'b'], [[]]))).toEqual(['a,b\r\n']);
  });
});
