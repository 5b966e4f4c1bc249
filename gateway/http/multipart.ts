import { AppError, ErrorCode } from '../../shared/errors.js';

/**
 * A small multipart/form-data parser (RFC 7578 over RFC 2046) for bodies already held in memory, whose size
 * the HTTP layer has capped. Strict where strictness costs nothing (CRLF line ends, a Content-Disposition
 * naming every part, a closing delimiter) so a truncated or hand-mangled upload is a 400, never half a file.
 */

export class MalformedMultipartError extends AppError {
  constructor(reason: string) {
    super(ErrorCode.BadRequest, `Malformed multipart body: ${reason}`);
  }
}

export interface MultipartPart {
  /** Lower-cased header names. */
  headers: Record<string, string>;
  /** The form field name (Content-Disposition `name`). */
  name: string;
  /** The file name the client sent, if any (`filename*` preferred over `filename`). */
  filename?: string;
  /** The part's declared Content-Type, if any (declared, so never trusted for anything that matters). */
  contentType?: string;
  /** The part's bytes: a view into the request body, not a copy. */
  data: Buffer;
}

export interface MultipartLimits {
  /** Most parts accepted; more is a 400 (a form with thousands of empty parts is an attack, not an upload). */
  maxParts?: number;
  /** Most bytes of one part's header block. */
  maxHeaderBytes?: number;
}

const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');
const DASH = 0x2d;
const CR = 0x0d;
const LF = 0x0a;

/** Whether a Content-Type is multipart/form-data (parameters aside). */
export const isMultipartFormData = (contentType: string | undefined): boolean =>
  /^\s*multipart\/form-data\s*(;|$)/i.test(contentType ?? '');

/**
 * Splits `type; a=1; b="two; three"` parameters. Quoted strings may contain `;` and backslash escapes.
 * Names are lower-cased; the first occurrence of a name wins.
 */
export function headerParameters(value: string): { value: string; params: Record<string, string> } {
  const semicolon = value.indexOf(';');
  const head = (semicolon === -1 ? value : value.slice(0, semicolon)).trim();
  const params: Record<string, string> = {};
  if (semicolon === -1) return { value: head, params };
  const pattern = /\s*;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/gy;
  pattern.lastIndex = semicolon;
  let match: RegExpExecArray | null;
  while ((match = pattern.exec(value)) !== null) {
    const name = match[1]!.toLowerCase();
    // Only \" and \\ are unescaped: browsers send other backslashes (Windows paths) literally.
    const parsed = match[2] !== undefined ? match[2].replace(/\\(["\\])/g, '$1') : match[3]!.trim();
    if (!(name in params)) params[name] = parsed;
  }
  return { value: head, params };
}

/** The boundary of a `multipart/form-data; boundary=...` Content-Type; throws a 400 when absent or invalid. */
export function boundaryOf(contentType: string): string {
  const boundary = headerParameters(contentType).params.boundary;
  if (boundary === undefined || boundary === '') throw new MalformedMultipartError('the Content-Type has no boundary');
  // RFC 2046: 1 to 70 characters, none of them CR or LF (which would make the delimiter unfindable).
  if (boundary.length > 70 || /[\r\n]/.test(boundary)) throw new MalformedMultipartError('the boundary is invalid');
  return boundary;
}

/** RFC 5987 `UTF-8''percent%20encoded` (what `filename*` carries); undefined when undecodable. */
function decodeExtendedValue(value: string): string | undefined {
  const match = /^([\w!#$%&+^`{}~-]+)'[^']*'(.*)$/.exec(value);
  if (!match) return undefined;
  const charset = match[1]!.toLowerCase();
  try {
    if (charset === 'utf-8') return decodeURIComponent(match[2]!);
    if (charset === 'iso-8859-1')
      return match[2]!.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  } catch {
    return undefined;
  }
  return undefined;
}

function parseHeaders(block: Buffer): Record<string, string> {
  const headers: Record<string, string> = {};
  let last: string | undefined;
  for (const line of block.toString('utf8').split('\r\n')) {
    if (line === '') continue;
    if ((line.startsWith(' ') || line.startsWith('\t')) && last !== undefined) {
      headers[last] += ` ${line.trim()}`; // obsolete line folding: still seen from old clients
      continue;
    }
    const colon = line.indexOf(':');
    if (colon < 1) throw new MalformedMultipartError(`bad part header line "${line.slice(0, 60)}"`);
    last = line.slice(0, colon).trim().toLowerCase();
    headers[last] = line.slice(colon + 1).trim();
  }
  return headers;
}

function toPart(headers: Record<string, string>, data: Buffer): MultipartPart {
  const disposition = headers['content-disposition'];
  if (disposition === undefined) throw new MalformedMultipartError('a part has no Content-Disposition');
  const { value, params } = headerParameters(disposition);
  if (value.toLowerCase() !== 'form-data' || params.name === undefined) {
    throw new MalformedMultipartError('a part is not "Content-Disposition: form-data" with a name');
  }
  const extended = params['filename*'] !== undefined ? decodeExtendedValue(params['filename*']) : undefined;
  const filename = extended ?? params.filename;
  const part: MultipartPart = { headers, name: params.name, data };
  if (filename !== undefined) part.filename = filename;
  if (headers['content-type'] !== undefined) part.contentType = headers['content-type'];
  return part;
}

/**
 * Parses a whole multipart body. The preamble before the first delimiter and the epilogue after the
 * closing one are ignored; anything else out of place (no delimiter, a delimiter not followed by a line end,
 * a part without headers' end, no closing delimiter) throws MalformedMultipartError (400).
 */
export function parseMultipart(body: Buffer, boundary: string, limits: MultipartLimits = {}): MultipartPart[] {
  const maxParts = limits.maxParts ?? 100;
  const maxHeaderBytes = limits.maxHeaderBytes ?? 16 * 1024;
  const dashBoundary = Buffer.from(`--${boundary}`, 'utf8');
  // Every delimiter but the first is CRLF + "--" + boundary: that CRLF belongs to the delimiter, not the data.
  const delimiter = Buffer.concat([CRLF, dashBoundary]);

  let position: number;
  if (body.subarray(0, dashBoundary.length).equals(dashBoundary)) position = dashBoundary.length;
  else {
    const first = body.indexOf(delimiter);
    if (first === -1) throw new MalformedMultipartError('no boundary delimiter found');
    position = first + delimiter.length;
  }

  const parts: MultipartPart[] = [];
  for (;;) {
    // After a delimiter: "--" closes the body; otherwise optional transport padding, then CRLF.
    if (body[position] === DASH && body[position + 1] === DASH) return parts;
    while (body[position] === 0x20 || body[position] === 0x09) position++;
    if (position >= body.length) throw new MalformedMultipartError('the body ends without a closing delimiter');
    if (body[position] !== CR || body[position + 1] !== LF) throw new MalformedMultipartError('a delimiter is not followed by a line end');
    position += 2;

    if (parts.length >= maxParts) throw new MalformedMultipartError(`more than ${maxParts} parts`);
    let headerBlock: Buffer;
    if (body[position] === CR && body[position + 1] === LF) {
      headerBlock = body.subarray(position, position); // no headers at all (toPart then refuses it)
      position += 2;
    } else {
      const headerEnd = body.indexOf(HEADER_END, position);
      if (headerEnd === -1 || headerEnd - position > maxHeaderBytes) {
        throw new MalformedMultipartError(headerEnd === -1 ? 'a part’s headers are not terminated' : 'a part’s headers are too large');
      }
      headerBlock = body.subarray(position, headerEnd);
      position = headerEnd + HEADER_END.length;
    }

    const next = body.indexOf(delimiter, position);
    if (next === -1) throw new MalformedMultipartError('the body ends inside a part (truncated?)');
    parts.push(toPart(parseHeaders(headerBlock), body.subarray(position, next)));
    position = next + delimiter.length;
  }
}
