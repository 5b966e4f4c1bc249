/**
 * A strict RFC 4180 reader for tests: quoted fields (with doubled quotes, commas and line breaks inside),
 * CRLF record ends. Throws on anything malformed, so a writer bug shows up as a failed parse.
 */
export function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let i = 0;
  if (text === '') return records;
  for (;;) {
    let field = '';
    if (text[i] === '"') {
      i++;
      for (;;) {
        if (i >= text.length) throw new Error('unterminated quoted field');
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            field += '"';
            i += 2;
          } else {
            i++;
            break;
          }
        } else field += text[i++];
      }
    } else {
      while (i < text.length && text[i] !== ',' && text[i] !== '\r' && text[i] !== '\n') {
        if (text[i] === '"') throw new Error(`bare quote at ${i}`);
        field += text[i++];
      }
    }
    record.push(field);
    if (text[i] === ',') {
      i++;
      continue;
    }
    if (text.startsWith('\r\n', i)) {
      records.push(record);
      record = [];
      i += 2;
      if (i >= text.length) return records;
      continue;
    }
    if (i >= text.length) {
      records.push(record);
      return records;
    }
    throw new Error(`unexpected ${JSON.stringify(text[i])} at ${i} (records end with CRLF)`);
  }
}
