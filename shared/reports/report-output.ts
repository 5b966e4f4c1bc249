import { promisify } from 'node:util';
import { deflateRaw, inflateRaw } from 'node:zlib';
import { csvChunks } from '../csv/csv.js';
import type { ReportColumn, ReportResult } from './report-params.js';

const deflate = promisify(deflateRaw);
const inflate = promisify(inflateRaw);

/**
 * A report's rows as the objects of its JSON answer, keyed by the column names in order, as
 * Object.fromEntries would key them (the names are the report's own: no `__proto__`). They are built property
 * by property in one order, so they share one hidden class and JSON.stringify writes them on its fast path:
 * Object.fromEntries' objects took it several times longer (100,000 rows of user_positions).
 */
export function rowObjects(meta: readonly ReportColumn[], rows: readonly (readonly unknown[])[]): Record<string, unknown>[] {
  const names = meta.map((column) => column.name);
  const objects = new Array<Record<string, unknown>>(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r]!;
    const object: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++) object[names[i]!] = row[i];
    objects[r] = object;
  }
  return objects;
}

/**
 * What a report job is asked to hand back: its answer already written as the route sends it (`format`), and
 * for a trip through Redis (`deflate`) compressed. A job that hands back rows instead (a worker from before
 * this) is rendered by the gateway with the same code.
 * Why: on BullMQ a result travels as JSON; 100,000 rows of raw_data are 1.2 million values that the worker
 * stringified and every gateway's QueueEvents parsed, before the route turned them into objects and
 * stringified them again (21 MB). The answer written once in the worker and deflated (about a seventh of the
 * size: column names and most values repeat) is one short base64 string to stringify and parse.
 */
export interface ReportRendering {
  format: 'json' | 'csv';
  deflate: boolean;
}

/** A rendered answer: the body (deflated and in base64 when asked), with the statistics the CSV header carries. */
export interface RenderedReport {
  format: 'json' | 'csv';
  statistics: ReportResult['statistics'];
  /** The body as text, or (`deflated`) its UTF-8 bytes deflated (raw deflate), in base64. */
  body: string;
  deflated: boolean;
}

/** The JSON answer or CSV document of a report, as text. */
export async function renderText(result: ReportResult, format: 'json' | 'csv'): Promise<string> {
  if (format === 'json')
    return JSON.stringify({ data: rowObjects(result.meta, result.rows), meta: result.meta, statistics: result.statistics });
  let text = '';
  for await (const chunk of csvChunks(
    result.meta.map((column) => column.name),
    [result.rows as never],
  ))
    text += chunk;
  return text;
}

/** The answer of a report written as JSON or CSV, deflated when asked (packRendered). */
export async function renderReport(result: ReportResult, rendering: ReportRendering): Promise<RenderedReport> {
  return packRendered(await renderText(result, rendering.format), rendering, result.statistics);
}

/**
 * An answer already written (also a report of another shape, an evacuation's), deflated when asked. Level 1: it
 * already shrinks a report's text about sevenfold, at a fraction of the time of the default level.
 */
export async function packRendered(
  text: string,
  rendering: ReportRendering,
  statistics: ReportResult['statistics'],
): Promise<RenderedReport> {
  const body = rendering.deflate ? (await deflate(Buffer.from(text, 'utf8'), { level: 1 })).toString('base64') : text;
  return { format: rendering.format, statistics, body, deflated: rendering.deflate };
}

/**
 * The largest answer a gateway inflates: a deflated result comes through Redis, which nothing authenticates, and
 * a few kilobytes can inflate to gigabytes. Far above a real one (100,000 rows of raw_data are about 21 MB).
 */
export const MAX_INFLATED_REPORT_BYTES = 256 * 1024 * 1024;

/**
 * The body to send: bytes when it came deflated (written as they are, no re-encoding), else the text. Inflated
 * on libuv's thread pool: a 100,000-row answer is tens of milliseconds of inflating that would otherwise hold
 * the gateway's event loop, and every live frame with it. Inflating stops at `maxBytes` (an internal error).
 */
export async function renderedBody(rendered: RenderedReport, maxBytes = MAX_INFLATED_REPORT_BYTES): Promise<Buffer | string> {
  if (!rendered.deflated) return rendered.body;
  try {
    return await inflate(Buffer.from(rendered.body, 'base64'), { maxOutputLength: maxBytes });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
      throw new Error(`a report answer inflates past ${maxBytes} bytes: refused`, { cause: error });
    throw error;
  }
}

export const isRendered = (result: ReportResult | RenderedReport): result is RenderedReport =>
  typeof (result as RenderedReport).body === 'string' && !('rows' in result);
