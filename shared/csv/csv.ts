/**
 * CSV as RFC 4180 writes it (comma separated, CRLF line ends, fields with a comma, quote, CR or LF quoted,
 * quotes doubled), made safe to open in a spreadsheet: a text cell that a spreadsheet would run as a
 * formula (starting with =, +, -, @, tab or CR) gets a leading apostrophe. Exports carry user-controlled
 * text (device identifiers, names), so every text cell goes through `csvCell`.
 */

export type CsvValue = string | number | boolean | null | undefined;

export const CSV_LINE_END = '\r\n';

const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

/** A text cell a spreadsheet would evaluate gets a leading `'`, which spreadsheets show as text. */
export function neutraliseFormula(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** RFC 4180: quote a field holding a comma, quote, CR or LF; double the quotes inside. */
export function quoteField(text: string): string {
  return NEEDS_QUOTES.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * One cell. Numbers are written as numbers (a negative number is not a formula) and non-finite ones as an
 * empty cell, booleans as `true`/`false`, null and undefined as an empty cell, text neutralised then quoted.
 */
export function csvCell(value: CsvValue): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return quoteField(neutraliseFormula(value));
}

/** One record, with its line end. */
export function csvRow(values: readonly CsvValue[]): string {
  let line = '';
  for (let i = 0; i < values.length; i++) line += (i === 0 ? '' : ',') + csvCell(values[i]);
  return line + CSV_LINE_END;
}

/**
 * A whole CSV document as text chunks of about `chunkBytes` (the header line first), from batches of rows
 * produced on demand: nothing is read ahead of what the consumer has taken, so a consumer that writes with
 * backpressure keeps memory flat however long the export.
 */
export async function* csvChunks(
  header: readonly string[],
  batches: AsyncIterable<Iterable<readonly CsvValue[]>> | Iterable<Iterable<readonly CsvValue[]>>,
  chunkBytes = 64 * 1024,
): AsyncGenerator<string> {
  let chunk = csvRow(header);
  for await (const batch of batches) {
    for (const row of batch) {
      chunk += csvRow(row);
      if (chunk.length >= chunkBytes) {
        yield chunk;
        chunk = '';
      }
    }
  }
  if (chunk.length > 0) yield chunk;
}
