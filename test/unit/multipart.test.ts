import { describe, expect, it } from 'vitest';
import { MalformedMultipartError, boundaryOf, isMultipartFormData, parseMultipart } from '../../gateway/http/multipart.js';
import { blobOf, encodeForm, pngBytes } from '../../testkit/images.js';

const B = 'XyZ-boundary-42';
/** Joins lines with CRLF, the way every real client frames a multipart body. */
const crlf = (...lines: (string | Buffer)[]) =>
  Buffer.concat(lines.flatMap((line, i) => [i === 0 ? Buffer.alloc(0) : Buffer.from('\r\n'), Buffer.from(line)]));

const filePart = (data: string | Buffer, name = 'image', filename = 'f.png') =>
  crlf(`--${B}`, `Content-Disposition: form-data; name="${name}"; filename="${filename}"`, 'Content-Type: image/png', '', data);

describe('boundaryOf', () => {
  it('reads a plain, a quoted and an oddly cased boundary parameter', () => {
    expect(boundaryOf(`multipart/form-data; boundary=${B}`)).toBe(B);
    expect(boundaryOf('multipart/form-data; charset=utf-8; BOUNDARY="a b;c"')).toBe('a b;c');
    expect(boundaryOf('multipart/form-data;boundary=axios-1.7.9-boundary-abc')).toBe('axios-1.7.9-boundary-abc');
  });

  it('refuses a missing, empty or over-long boundary with a 400', () => {
    for (const contentType of [
      'multipart/form-data',
      'multipart/form-data; boundary=',
      'multipart/form-data; boundary=""',
      `multipart/form-data; boundary=${'x'.repeat(71)}`,
    ]) {
      const error = (() => {
        try {
          boundaryOf(contentType);
        } catch (caught) {
          return caught;
        }
      })();
      expect(error, contentType).toBeInstanceOf(MalformedMultipartError);
      expect((error as MalformedMultipartError).status).toBe(400);
    }
  });

  it('recognises multipart/form-data and nothing else', () => {
    expect(isMultipartFormData('Multipart/Form-Data; boundary=x')).toBe(true);
    expect(isMultipartFormData('multipart/form-data')).toBe(true);
    expect(isMultipartFormData('multipart/mixed; boundary=x')).toBe(false);
    expect(isMultipartFormData('multipart/form-datax')).toBe(false);
    expect(isMultipartFormData('image/png')).toBe(false);
    expect(isMultipartFormData(undefined)).toBe(false);
  });
});

describe('parseMultipart', () => {
  it('parses a file and a field, with names, filename, content type and headers', () => {
    const body = Buffer.concat([
      filePart('PNGDATA'),
      Buffer.from('\r\n'),
      crlf(`--${B}`, 'Content-Disposition: form-data; name="rtf"', '', 'true', `--${B}--`, ''),
    ]);
    const parts = parseMultipart(body, B);
    expect(parts).toHaveLength(2);
    expect(parts[0]).toMatchObject({ name: 'image', filename: 'f.png', contentType: 'image/png' });
    expect(parts[0]!.data.toString()).toBe('PNGDATA');
    expect(parts[0]!.headers['content-disposition']).toContain('form-data');
    expect(parts[1]).toMatchObject({ name: 'rtf' });
    expect(parts[1]!.filename).toBeUndefined();
    expect(parts[1]!.contentType).toBeUndefined();
    expect(parts[1]!.data.toString()).toBe('true');
  });

  it('keeps binary data intact: CR, LF, dashes and near-boundaries inside the data are data', () => {
    const tricky = Buffer.concat([
      Buffer.from('\r\n\r\n--'),
      Buffer.from(`--${B.slice(0, -1)}`),
      Buffer.from([0, 255, 13, 10, 65]),
      Buffer.from(`\n--${B}`),
      Buffer.from('\r\n'),
    ]);
    const body = Buffer.concat([filePart(tricky), Buffer.from(`\r\n--${B}--`)]);
    const [part] = parseMultipart(body, B);
    expect(part!.data.equals(tricky)).toBe(true);
  });

  it('takes the CRLF before a delimiter as the delimiter’s, not the data’s', () => {
    const body = Buffer.concat([filePart('ends with a line\r\n'), Buffer.from(`\r\n--${B}--\r\n`)]);
    expect(parseMultipart(body, B)[0]!.data.toString()).toBe('ends with a line\r\n');
  });

  it('ignores the preamble and the epilogue, and accepts transport padding after a delimiter', () => {
    const body = Buffer.concat([Buffer.from('this is a preamble\r\n'), filePart('x'), Buffer.from(`\r\n--${B}-- \r\nepilogue --${B}\r\n`)]);
    expect(parseMultipart(body, B).map((part) => part.data.toString())).toEqual(['x']);
    const padded = Buffer.from(`--${B} \t\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--${B}--`);
    expect(parseMultipart(padded, B)[0]!.data.toString()).toBe('1');
  });

  it('parses an empty part and a body with only the closing delimiter', () => {
    const body = Buffer.concat([filePart(''), Buffer.from(`\r\n--${B}--`)]);
    expect(parseMultipart(body, B)[0]!.data.length).toBe(0);
    expect(parseMultipart(Buffer.from(`--${B}--\r\n`), B)).toEqual([]);
  });

  it('decodes filename* (RFC 5987), quoted-pair escapes and keeps Windows paths for the caller to trim', () => {
    const body = crlf(
      `--${B}`,
      `Content-Disposition: form-data; name="image"; filename="fallback.png"; filename*=UTF-8''pl%C3%A1n%201.png`,
      '',
      'a',
      `--${B}`,
      'content-disposition: form-data ; name="b" ; filename="say \\"hi\\".png"',
      '',
      'b',
      `--${B}`,
      'Content-Disposition: form-data; name=c; filename="C:\\temp\\x.png"',
      '',
      'c',
      `--${B}--`,
    );
    const parts = parseMultipart(body, B);
    expect(parts.map((part) => [part.name, part.filename])).toEqual([
      ['image', 'plán 1.png'],
      ['b', 'say "hi".png'],
      ['c', 'C:\\temp\\x.png'],
    ]);
  });

  it('unfolds an obsolete folded header line', () => {
    const body = crlf(`--${B}`, 'Content-Disposition: form-data;', ' name="folded"', '', 'v', `--${B}--`);
    expect(parseMultipart(body, B)[0]!.name).toBe('folded');
  });

  it('reads what fetch’s own FormData encoder produces, byte for byte', async () => {
    const png = pngBytes(4, 3);
    const form = new FormData();
    form.append('image', blobOf(png, 'image/png'), 'floor "1".png');
    form.append('rtf', 'true');
    const { body, contentType } = await encodeForm(form);
    const parts = parseMultipart(body, boundaryOf(contentType));
    expect(parts.map((part) => part.name)).toEqual(['image', 'rtf']);
    expect(parts[0]!.data.equals(png)).toBe(true);
    expect(parts[0]!.filename).toMatch(/^floor (%22|")1(%22|")\.png$/);
    expect(parts[0]!.contentType).toBe('image/png');
  });

  describe('refuses malformed bodies with MalformedMultipartError (400)', () => {
    const closed = Buffer.concat([filePart('data'), Buffer.from(`\r\n--${B}--`)]);
    const cases: Record<string, Buffer> = {
      'no delimiter at all': Buffer.from('just some text'),
      'another boundary': Buffer.from(closed.toString().replaceAll(B, 'other')),
      'truncated inside the data': closed.subarray(0, closed.indexOf('data') + 2),
      'truncated inside the headers': closed.subarray(0, closed.indexOf('Content-Type') + 5),
      'truncated right after a delimiter': Buffer.from(`--${B}`),
      'no closing delimiter': Buffer.concat([filePart('data'), Buffer.from(`\r\n--${B}\r\n`)]),
      'a delimiter glued to more text': Buffer.concat([filePart('data'), Buffer.from(`\r\n--${B}junk\r\n`)]),
      'a delimiter followed by text, not a line end': Buffer.from(`--${B}XYContent-Disposition: form-data; name="a"\r\n\r\nx\r\n--${B}--`),
      'bare LF line ends': Buffer.from(`--${B}\nContent-Disposition: form-data; name="a"\n\nx\n--${B}--`),
      'a part without Content-Disposition': crlf(`--${B}`, 'Content-Type: text/plain', '', 'x', `--${B}--`),
      'a part without headers': crlf(`--${B}`, '', 'x', `--${B}--`),
      'a disposition without a name': crlf(`--${B}`, 'Content-Disposition: form-data; filename="a.png"', '', 'x', `--${B}--`),
      'a disposition that is not form-data': crlf(`--${B}`, 'Content-Disposition: attachment; name="a"', '', 'x', `--${B}--`),
      'a header line without a colon': crlf(`--${B}`, 'Content-Disposition: form-data; name="a"', 'garbage', '', 'x', `--${B}--`),
    };
    for (const [label, body] of Object.entries(cases)) {
      it(label, () => {
        expect(() => parseMultipart(body, B)).toThrow(MalformedMultipartError);
      });
    }

    it('more parts than the limit, and headers larger than the limit', () => {
      const many = Buffer.concat([
        ...Array.from({ length: 4 }, () => Buffer.concat([filePart('x'), Buffer.from('\r\n')])),
        Buffer.from(`--${B}--`),
      ]);
      expect(parseMultipart(many, B, { maxParts: 4 })).toHaveLength(4);
      expect(() => parseMultipart(many, B, { maxParts: 3 })).toThrow(/more than 3 parts/);
      expect(() => parseMultipart(closed, B, { maxHeaderBytes: 20 })).toThrow(/too large/);
    });
  });
});
