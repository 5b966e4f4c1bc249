import { csvChunks, type CsvValue } from '../../shared/csv/csv.js';
import { ValidationError } from '../../shared/errors.js';
import { pseudonymizer } from '../../shared/reports/pseudonymize.js';
import { PositionHistory, type HistoryQuery, type HistoryRow } from '../../shared/positions/position-history.js';
import type { Storage } from '../../shared/storage/storage.js';
import { formatOffsetDate, localDay } from '../../shared/time/offset-date.js';
import { confinedUserId } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { CartographyService } from '../cartography/cartography-service.js';
import type { HistoryWindow } from './history-window.js';
import { reportsPseudonymous } from '../privacy/organization-privacy.js';

/** Past this many fixes the JSON answer is refused (422): it is built in memory; the CSV export is not. */
export const MAX_JSON_ROWS = 100_000;

export const CSV_HEADER = ['device_id', 'time_sec', 'is_indoor', 'floor_id', 'position_x', 'position_y', 'yaw', 'lat', 'lng'] as const;

/** One record of `{analytics: [...]}` (spec 2.10). */
export interface AnalyticsRecord {
  /** The device identifier the app sends (a string: identifiers are the app's, not numeric ids). */
  device_id: string;
  floor_id: number;
  /** [x, y], metres on the floor. */
  position: [number, number];
  /** Radians, as uploaded. */
  yaw: number;
  /** Local time in the offset of `date`: `2026-05-01T10:00:00.000+02:00`. */
  time_sec: string;
}

export interface HistoryOptions {
  maxJsonRows?: number;
  pageSize?: number;
}

/**
 * Position history of a building (spec 4.3, 2.10): the JSON list of indoor fixes and the CSV export of every
 * fix. Both read the same keyset pages; the JSON answer stops at `maxJsonRows`, the export streams page by
 * page so its memory does not grow with its length.
 */
export class HistoryService {
  private readonly reader: PositionHistory;
  private readonly maxJsonRows: number;

  constructor(
    private readonly storage: Storage,
    private readonly cartography: CartographyService,
    options: HistoryOptions = {},
  ) {
    this.reader = new PositionHistory(storage, options.pageSize);
    this.maxJsonRows = options.maxJsonRows ?? MAX_JSON_ROWS;
  }

  /**
   * Whether the answer names devices by pseudonym: asked (`pseudonymize=true`), or forced by the organization for
   * everyone but admins (its privacy settings). A pseudonymous answer about one named device is refused (422).
   */
  private async pseudonymous(principal: Principal, window: HistoryWindow): Promise<boolean> {
    let pseudonymous = window.pseudonymize === true;
    if (!pseudonymous && principal.role !== 'admin') {
      pseudonymous = await reportsPseudonymous(this.storage, principal.organizationId);
    }
    if (pseudonymous && window.deviceId !== undefined)
      throw new ValidationError([{ field: 'query.device_id', message: 'not in a pseudonymous export' }]);
    return pseudonymous;
  }

  /** The building must be the caller's (404 otherwise); a plain user sees only their own fixes (permissions.ts, confinedUserId). */
  private async scope(principal: Principal, buildingId: number, window: HistoryWindow): Promise<HistoryQuery> {
    await this.cartography.building(this.storage.em(), principal, buildingId);
    return {
      organizationId: principal.organizationId,
      buildingId,
      from: window.from,
      to: window.to,
      deviceId: window.deviceId,
      userId: confinedUserId(principal),
    };
  }

  /** Indoor fixes only: the JSON form has a floor and a position but no lat/lng or indoor flag. */
  async analytics(principal: Principal, buildingId: number, window: HistoryWindow): Promise<{ analytics: AnalyticsRecord[] }> {
    const query = { ...(await this.scope(principal, buildingId, window)), indoorOnly: true };
    const device = (await this.pseudonymous(principal, window)) ? devicePseudonyms() : (id: string) => id;
    const analytics: AnalyticsRecord[] = [];
    for await (const page of this.reader.pages(query)) {
      if (analytics.length + page.length > this.maxJsonRows) {
        throw new ValidationError(
          [
            {
              field: 'query.date_end',
              message: `more than ${this.maxJsonRows} positions: narrow the range or the device, or download /api/v1/real_time/export/${buildingId}`,
            },
          ],
          'Too many positions for one JSON answer',
        );
      }
      for (const row of page) {
        analytics.push({
          device_id: device(row.deviceId),
          floor_id: row.floorId!,
          position: [row.x!, row.y!],
          yaw: row.yaw,
          time_sec: formatOffsetDate(row.timestamp, window.offsetMinutes),
        });
      }
    }
    return { analytics };
  }

  /**
   * The CSV of every fix, as chunks. The first page is read before this resolves, so a failure to read
   * (or a building out of scope) is still an error status rather than a truncated 200.
   */
  async exportCsv(
    principal: Principal,
    buildingId: number,
    window: HistoryWindow,
  ): Promise<{ stream: AsyncIterable<string>; filename: string }> {
    const scope = await this.scope(principal, buildingId, window);
    const device = (await this.pseudonymous(principal, window)) ? devicePseudonyms() : (id: string) => id;
    const pages = this.reader.pages(scope);
    const first = await pages.next();
    const offset = window.offsetMinutes;
    async function* rows(): AsyncGenerator<Iterable<readonly CsvValue[]>> {
      try {
        if (first.done) return;
        yield first.value.map((row) => csvValues(row, offset, device));
        for await (const page of pages) yield page.map((row) => csvValues(row, offset, device));
      } finally {
        await pages.return(undefined);
      }
    }
    return { stream: csvChunks(CSV_HEADER, rows()), filename: `positions-${buildingId}-${localDay(window.from, offset)}.csv` };
  }
}

/** Device pseudonyms of one answer: a key of its own, dropped with it. */
function devicePseudonyms(): (id: string) => string {
  const named = pseudonymizer();
  return (id) => named('d', id) as string;
}

function csvValues(row: HistoryRow, offsetMinutes: number, device: (id: string) => string): CsvValue[] {
  return [
    device(row.deviceId),
    formatOffsetDate(row.timestamp, offsetMinutes),
    row.indoor,
    row.floorId,
    row.x,
    row.y,
    row.yaw,
    row.lat,
    row.lng,
  ];
}
