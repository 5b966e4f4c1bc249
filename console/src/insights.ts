import { createBuildingTransform } from '../../shared/geo/building-transform.js';
import type { Api } from './api.js';
import { h, setText, svg } from './dom.js';
import type { MapHeat, MapRoute, MapTrail } from './floor-map.js';
import type { Alarm, BuildingDetail, RankedDevice } from './model.js';
import { walkTime } from './walk-time.js';

/**
 * What an operator would rather see than read: the route from the nearest responder to an alarm, a device's
 * trail, where people gather (heatmap), and a day in two charts. Each function asks the public API, the same
 * one an integrator uses, and returns what the map or the page draws.
 */

/** The heatmap is drawn in squares of this many metres (the report's geohash cells are about 1 x 0.6 m). */
export const HEAT_CELL_M = 2;

export interface ResponderRoute {
  responder: RankedDevice;
  route: MapRoute;
  distance_m: number;
  duration_s: number;
  /** Floors the route crosses, in order (their ids). */
  floors: number[];
}

/**
 * The nearest responder (a live device of `groupId`, or any device, other than the alarm's own) by walking
 * distance, and its route to the alarm; undefined when the alarm has no position or nobody can reach it.
 */
export async function responderRoute(
  api: Api,
  alarm: Alarm,
  groupId: string | null,
  describe: (device: RankedDevice) => string,
): Promise<ResponderRoute | undefined> {
  const floorId = alarm.position?.floor_id ?? alarm.floor_id;
  const point = alarm.position?.cartesians;
  if (alarm.building_id === null || floorId === null || !point) return undefined;
  const ranked = await api.nearestDevices(alarm.building_id, floorId, point.x, point.y, groupId, 5);
  const responder = ranked.data.find((device) => device.device_id !== alarm.device_id);
  if (!responder) return undefined;
  const route = await api.routeToAlarm(alarm.building_id, responder.device_id, alarm.id);
  return {
    responder,
    route: { legs: route.legs, label: `${describe(responder)}: ${Math.round(route.distance_m)} m, ${walkTime(route.duration_s)}` },
    distance_m: route.distance_m,
    duration_s: route.duration_s,
    floors: route.legs.map((leg) => leg.floor_id),
  };
}

/**
 * A device's positions in this building over the last `minutes`, oldest first by their own time, each with whether
 * it reached us late (the trail route, not the `raw_data` report, which carries no arrival time).
 */
export async function deviceTrail(
  api: Api,
  buildingId: number,
  deviceId: string,
  minutes: number,
  now = Date.now(),
): Promise<MapTrail & { late: number; truncated: boolean }> {
  const result = await api.trail(buildingId, deviceId, now - minutes * 60_000, now + 60_000);
  const points = result.data.map((fix) => ({
    floorId: fix.floor_id,
    x: fix.x,
    y: fix.y,
    at: Date.parse(fix.ts),
    late: fix.late,
    delayMs: fix.delay_ms,
  }));
  return { deviceId, points, late: result.late_count, truncated: result.truncated };
}

/** The heatmap report of a floor over the last `hours`, binned into HEAT_CELL_M squares of floor metres. */
export async function floorHeat(api: Api, building: BuildingDetail, floorId: number, hours: number, now = Date.now()): Promise<MapHeat> {
  const result = await api.report<{ lat: number; lng: number; positions: number }>('heatmap', {
    building_id: String(building.id),
    floor_id: String(floorId),
    from_date: new Date(now - hours * 3600_000).toISOString(),
    to_date: new Date(now + 60_000).toISOString(),
  });
  const transform = createBuildingTransform({
    location: building.location!,
    dimensions: building.dimensions,
    rotation: building.rotation ?? 0,
  });
  const bins = new Map<string, { x: number; y: number; weight: number }>();
  for (const cell of result.data) {
    const { x, y } = transform.toCartesian({ lat: cell.lat, lng: cell.lng });
    const column = Math.floor(x / HEAT_CELL_M);
    const row = Math.floor(y / HEAT_CELL_M);
    const key = `${column},${row}`;
    const bin = bins.get(key) ?? { x: (column + 0.5) * HEAT_CELL_M, y: (row + 0.5) * HEAT_CELL_M, weight: 0 };
    bin.weight += cell.positions;
    bins.set(key, bin);
  }
  return { floorId, size: HEAT_CELL_M, cells: [...bins.values()] };
}

// --- the day report -----------------------------------------------------------------------------------------

interface Bar {
  label: string;
  value: number;
  /** Shown on the bar's tooltip and in the table read by screen readers. */
  text: string;
}

/** A bar chart in SVG (no external assets), with a caption and the same figures as a table for screen readers. */
function barChart(title: string, bars: Bar[], unit: string, horizontal: boolean): HTMLElement {
  const max = Math.max(1, ...bars.map((bar) => bar.value));
  const width = 640;
  const barSpace = horizontal ? 26 : width / Math.max(1, bars.length);
  const height = horizontal ? Math.max(60, bars.length * barSpace + 10) : 220;
  const labelWidth = horizontal ? 200 : 0;
  const chart = svg('svg', {
    class: 'chart',
    viewBox: `0 0 ${width} ${height + (horizontal ? 0 : 24)}`,
    role: 'img',
    'aria-label': `${title}: ${bars.length} bars`,
  });
  bars.forEach((bar, index) => {
    const share = bar.value / max;
    if (horizontal) {
      const y = 5 + index * barSpace;
      const length = (width - labelWidth - 70) * share;
      chart.append(
        svg(
          'text',
          { class: 'chart-label', x: labelWidth - 8, y: y + barSpace / 2, 'text-anchor': 'end', 'dominant-baseline': 'middle' },
          bar.label,
        ),
        svg(
          'rect',
          { class: 'chart-bar', x: labelWidth, y: y + 3, width: Math.max(1, length), height: barSpace - 6, 'data-value': bar.value },
          svg('title', {}, bar.text),
        ),
        svg('text', { class: 'chart-value', x: labelWidth + length + 6, y: y + barSpace / 2, 'dominant-baseline': 'middle' }, bar.text),
      );
    } else {
      const barHeight = (height - 20) * share;
      const x = index * barSpace;
      chart.append(
        svg(
          'rect',
          {
            class: 'chart-bar',
            x: x + 2,
            y: height - barHeight,
            width: Math.max(1, barSpace - 4),
            height: Math.max(bar.value > 0 ? 1 : 0, barHeight),
            'data-value': bar.value,
          },
          svg('title', {}, `${bar.label}: ${bar.text}`),
        ),
      );
      if (index % 3 === 0)
        chart.append(svg('text', { class: 'chart-label', x: x + barSpace / 2, y: height + 16, 'text-anchor': 'middle' }, bar.label));
    }
  });
  const table = h(
    'table',
    { class: 'visually-hidden' },
    h('caption', {}, title),
    h('tr', {}, h('th', { scope: 'col' }, 'label'), h('th', { scope: 'col' }, unit)),
    ...bars.map((bar) => h('tr', {}, h('th', { scope: 'row' }, bar.label), h('td', {}, bar.text))),
  );
  return h('div', { class: 'chart-box' }, chart, table);
}

const formatDuration = (seconds: number) => (seconds >= 3600 ? `${(seconds / 3600).toFixed(1)} h` : `${Math.round(seconds / 60)} min`);

/**
 * A day of a building in two charts: visitors per hour and total stay time per geofence (the visitors and
 * geofencing_stay_time reports, in the browser's time zone), each with its CSV download.
 */
export class DayReport {
  private readonly downloads: string[] = [];

  constructor(
    private readonly api: () => Api,
    private readonly elements: { status: HTMLElement; visitors: HTMLElement; stays: HTMLElement },
  ) {}

  async show(building: BuildingDetail, day: string): Promise<void> {
    const timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
    const start = new Date(`${day}T00:00:00`);
    const end = new Date(start.getTime());
    end.setDate(end.getDate() + 1);
    const window = { from_date: start.toISOString(), to_date: end.toISOString(), time_zone: timeZone };
    const visitorsParams = { building_id: String(building.id), group: 'hour', ...window };
    const staysParams = { building_ids: String(building.id), group: 'day', ...window };
    setText(this.elements.status, `Loading ${day}…`);
    this.release();
    try {
      const [visitors, stays] = await Promise.all([
        this.api().report<{ group: string; visitors: number }>('visitors', visitorsParams),
        this.api().report<{ geofence_name: string; stay_time_s: number }>('geofencing_stay_time', staysParams),
      ]);
      const perHour = new Map<number, number>();
      // Hours come as local 'YYYY-MM-DD HH:00' in the requested time zone.
      for (const row of visitors.data) perHour.set(Number(row.group.slice(11, 13)), row.visitors);
      const hourBars = Array.from({ length: 24 }, (_, hour) => ({
        label: `${String(hour).padStart(2, '0')}h`,
        value: perHour.get(hour) ?? 0,
        text: `${perHour.get(hour) ?? 0} visitors`,
      }));
      const perFence = new Map<string, number>();
      for (const row of stays.data) perFence.set(row.geofence_name, (perFence.get(row.geofence_name) ?? 0) + row.stay_time_s);
      const fenceBars = [...perFence.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 15)
        .map(([name, seconds]) => ({ label: name, value: seconds, text: formatDuration(seconds) }));
      this.elements.visitors.replaceChildren(
        h('figcaption', {}, 'Visitors per hour'),
        barChart(`Visitors per hour on ${day}`, hourBars, 'visitors', false),
        this.csvButton('visitors', visitorsParams, `visitors-${day}.csv`),
      );
      this.elements.stays.replaceChildren(
        h('figcaption', {}, 'Stay time per geofence'),
        fenceBars.length > 0
          ? barChart(`Stay time per geofence on ${day}`, fenceBars, 'stay time', true)
          : h('p', { class: 'map-summary' }, 'No stays in geofences that day.'),
        this.csvButton('geofencing_stay_time', staysParams, `stay-time-${day}.csv`),
      );
      const peak = hourBars.reduce((best, bar) => (bar.value > best.value ? bar : best), hourBars[0]!);
      setText(
        this.elements.status,
        `${building.name}, ${day}: busiest hour ${peak.label} with ${peak.value} visitor${peak.value === 1 ? '' : 's'}; ${perFence.size} geofence${perFence.size === 1 ? '' : 's'} visited.`,
      );
    } catch (error) {
      setText(this.elements.status, `Could not load the report: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  clear(): void {
    this.release();
    this.elements.visitors.replaceChildren();
    this.elements.stays.replaceChildren();
    setText(this.elements.status, '');
  }

  /** The CSV comes with the token in a header, so the button fetches it and hands the browser a blob to save. */
  private csvButton(report: string, params: Record<string, string>, filename: string): HTMLElement {
    const button = h('button', { type: 'button', class: 'csv-download', 'data-report': report }, 'Download CSV');
    button.addEventListener('click', () => {
      button.setAttribute('aria-disabled', 'true');
      this.api()
        .reportCsvUrl(report, params)
        .then((url) => {
          this.downloads.push(url);
          const link = h('a', { href: url, download: filename, hidden: true });
          document.body.append(link);
          link.click();
          link.remove();
        })
        .catch((error: unknown) =>
          setText(this.elements.status, `Could not download: ${error instanceof Error ? error.message : String(error)}`),
        )
        .finally(() => button.removeAttribute('aria-disabled'));
    });
    return button;
  }

  private release(): void {
    for (const url of this.downloads.splice(0)) URL.revokeObjectURL(url);
  }
}
