import { h, setText, svg } from './dom.js';
import type { Api } from './api.js';
import { placeLabels, type LabelBox, type LabelCandidate } from './map-labels.js';
import type { BuildingDetail, Floor, PoiCategory, PositionFeature } from './model.js';

/** A device with no position for this long is drawn grey and marked "stale". */
export const STALE_AFTER_MS = 30_000;
/** ... and forgotten after this long (the gateway's live view forgets it too). */
const FORGET_AFTER_MS = 15 * 60_000;
/** Pixels per metre of the plain background drawn when a floor has no image. */
const PLAIN_SCALE = 10;

interface Device {
  feature: PositionFeature;
  /** When the position was taken (its own timestamp), ms since the epoch. */
  at: number;
  group?: SVGGElement;
}

/** A route to draw: each leg's points on its floor (only the shown floor's leg is drawn). */
export interface MapRoute {
  legs: { floor_id: number; points: { x: number; y: number }[] }[];
  label: string;
}

/** One fix of a trail: where, and whether it reached the server late (more than the reorder window after it was taken). */
export interface TrailPoint {
  floorId: number;
  x: number;
  y: number;
  /** When it was taken, ms since the epoch. */
  at: number;
  late: boolean;
  /** How long after it was taken it reached the server. */
  delayMs: number;
}

/** Where a device has been, oldest first (by the fixes' own times). */
export interface MapTrail {
  deviceId: string;
  points: TrailPoint[];
}

/** A stretch of a trail drawn one way: solid while its fixes came on time, dashed where they came late. */
export interface TrailRun {
  late: boolean;
  points: TrailPoint[];
  /** The late fixes of a late run (those that make it late), oldest first. */
  lateFixes: TrailPoint[];
}

/**
 * Cuts a trail (of one floor) into runs: a segment touching a late fix is late (the way there and the way back
 * were only learned from the buffer), so a late stretch is dashed from the last on-time fix before it to the first
 * after it. Consecutive runs share their end point; a single fix is one run of its own.
 */
export function trailRuns(points: readonly TrailPoint[]): TrailRun[] {
  if (points.length === 0) return [];
  if (points.length === 1) return [{ late: points[0]!.late, points: [points[0]!], lateFixes: points[0]!.late ? [points[0]!] : [] }];
  const runs: TrailRun[] = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const a = points[i]!;
    const b = points[i + 1]!;
    const late = a.late || b.late;
    const current = runs.at(-1);
    if (current && current.late === late) current.points.push(b);
    else runs.push({ late, points: [a, b], lateFixes: [] });
  }
  for (const run of runs) if (run.late) run.lateFixes = run.points.filter((point) => point.late);
  return runs;
}

/** "late by 4 min", or "late by up to 4 min" when the run's fixes came later than one another. */
export function lateRunText(run: TrailRun): string {
  const delays = run.lateFixes.map((point) => point.delayMs);
  if (delays.length === 0) return '';
  const most = ago(Math.max(...delays));
  return ago(Math.min(...delays)) === most ? `late by ${most}` : `late by up to ${most}`;
}

/** Heat on one floor: squares of `size` metres centred on (x, y), shaded by weight. */
export interface MapHeat {
  floorId: number;
  size: number;
  cells: { x: number; y: number; weight: number }[];
}

interface Frame {
  /** Drawing size in SVG user units (the image's pixels, or metres x PLAIN_SCALE). */
  width: number;
  height: number;
  /** User units per metre. */
  scale: number;
}

/**
 * The floor as an SVG whose user units are the floorplan's pixels: metres map through `maps.scale` (pixels
 * per metre), y flipped because floor coordinates start at the bottom-left corner. Zones and event areas are
 * outlined; each device is a dot with a label, grey once stale.
 */
export class FloorMap {
  private readonly devices = new Map<string, Device>();
  private building: BuildingDetail | null = null;
  private floor: Floor | null = null;
  private frame: Frame | null = null;
  private imageUrl: string | null = null;
  private highlighted: { deviceId: string | null; position: { x: number; y: number } | null } = { deviceId: null, position: null };
  private readonly root: SVGSVGElement;
  private readonly layers: {
    base: SVGGElement;
    heat: SVGGElement;
    zones: SVGGElement;
    pois: SVGGElement;
    trail: SVGGElement;
    route: SVGGElement;
    alarm: SVGGElement;
    devices: SVGGElement;
  };
  private overlays: { route: MapRoute | null; trail: MapTrail | null; heat: MapHeat | null } = { route: null, trail: null, heat: null };
  private loadToken = 0;
  /** Zone and event names, placed with the device labels so that none overlaps another. */
  private zoneLabels: { element: SVGTextElement; box: LabelBox }[] = [];
  /** The delay of each late stretch of the trail, with where it may go (beside each of its segments), best first. */
  private trailLabels: { element: SVGTextElement; options: { box: LabelBox; x: number; y: number; anchor: 'start' | 'end' }[] }[] = [];
  /** Where POI icons stand: labels keep off them as they keep off device dots. */
  private poiBoxes: LabelBox[] = [];
  /** The organization's POI categories (fetched once), and their icons as blob: URLs (revoked by clear()). */
  private categories: Promise<Map<number, PoiCategory>> | null = null;
  private readonly icons = new Map<string, Promise<string | null>>();
  private labelsDue = false;
  /** Measured text widths per font size and text (measuring is a layout, so once per label). */
  private readonly textWidths = new Map<string, number>();
  /** When the live link was lost (null: live): the map dims and says how old its data is. */
  private linkLostAt: number | null = null;
  private readonly linkOverlay: HTMLElement;

  constructor(
    private readonly container: HTMLElement,
    private readonly summary: HTMLElement,
    private readonly api: () => Api,
    private readonly userName: (userId: string | null) => string | null,
    /** A device dot clicked (or chosen with Enter): the console shows its trail. */
    private readonly selectDevice: (deviceId: string) => void = () => undefined,
  ) {
    this.root = svg('svg', { class: 'floor-map', role: 'img', 'aria-labelledby': 'map-summary', preserveAspectRatio: 'xMidYMid meet' });
    this.layers = {
      base: svg('g', { class: 'layer-base' }),
      heat: svg('g', { class: 'layer-heat' }),
      zones: svg('g', { class: 'layer-zones' }),
      pois: svg('g', { class: 'layer-pois' }),
      trail: svg('g', { class: 'layer-trail' }),
      route: svg('g', { class: 'layer-route' }),
      alarm: svg('g', { class: 'layer-alarm' }),
      devices: svg('g', { class: 'layer-devices' }),
    };
    this.root.append(
      this.layers.base,
      this.layers.heat,
      this.layers.zones,
      this.layers.pois,
      this.layers.trail,
      this.layers.route,
      this.layers.alarm,
      this.layers.devices,
    );
    this.linkOverlay = h('p', { class: 'map-link-lost', role: 'status', hidden: true });
    this.container.replaceChildren(this.root, this.linkOverlay);
  }

  /**
   * The live link's state: lost since `lostAt` (ms since the epoch) dims the map and says "Connection lost"
   * with the age of the data, so a frozen building never reads as a live one; null (live again) undims it.
   */
  setLink(lostAt: number | null, now = Date.now()): void {
    this.linkLostAt = lostAt;
    this.container.dataset.link = lostAt === null ? 'live' : 'lost';
    this.linkOverlay.hidden = lostAt === null;
    if (lostAt !== null) setText(this.linkOverlay, `Connection lost · data from ${ago(now - lostAt)} ago`);
    this.describe(now);
  }

  /** Shows a floor of a building: its plan (fetched with the token), zones, event areas and the devices on it. */
  async show(building: BuildingDetail, floor: Floor | null): Promise<void> {
    const token = ++this.loadToken;
    if (this.building?.id !== building.id) this.devices.clear();
    this.building = building;
    this.floor = floor;
    this.releaseImage();
    this.frame = null; // nothing is drawn until the new plan's size is known
    for (const layer of Object.values(this.layers)) layer.replaceChildren();
    this.zoneLabels = [];
    this.trailLabels = [];
    this.poiBoxes = [];
    this.root.dataset.floorId = floor ? String(floor.id) : '';
    let frame: Frame = {
      width: building.dimensions.width * PLAIN_SCALE,
      height: building.dimensions.length * PLAIN_SCALE,
      scale: PLAIN_SCALE,
    };
    let image: SVGImageElement | null = null;
    if (floor?.maps.map_url) {
      try {
        const url = await this.api().imageUrl(floor.maps.map_url);
        if (token !== this.loadToken) return URL.revokeObjectURL(url);
        const size = await naturalSize(url);
        if (token !== this.loadToken) return URL.revokeObjectURL(url);
        this.imageUrl = url;
        const scale = floor.maps.scale ?? size.width / building.dimensions.width;
        frame = { width: size.width, height: size.height, scale };
        image = svg('image', {
          class: 'floorplan',
          href: url,
          x: 0,
          y: 0,
          width: size.width,
          height: size.height,
          preserveAspectRatio: 'none',
        });
      } catch (error) {
        console.warn('floorplan not loaded', error);
      }
    }
    if (token !== this.loadToken) return;
    this.frame = frame;
    this.root.setAttribute('viewBox', `0 0 ${frame.width} ${frame.height}`);
    this.root.dataset.scale = String(frame.scale);
    this.root.dataset.height = String(frame.height);
    // The plain background is also the hit area and the reference box tests measure against.
    this.layers.base.append(
      svg('rect', { class: image ? 'floor-frame' : 'floor-plain', x: 0, y: 0, width: frame.width, height: frame.height }),
    );
    if (image) this.layers.base.append(image);
    else this.layers.base.append(grid(frame, 10));
    if (floor) this.drawZones(building, floor.id);
    if (floor) this.drawPois(building, floor.id);
    this.layers.devices.replaceChildren();
    for (const device of this.devices.values()) device.group = undefined;
    this.redraw();
    this.scheduleLabels(); // zone and POI names, even on a floor with no device
  }

  clear(): void {
    ++this.loadToken;
    this.overlays = { route: null, trail: null, heat: null };
    this.releaseImage();
    this.devices.clear();
    this.building = null;
    this.floor = null;
    this.frame = null;
    for (const layer of Object.values(this.layers)) layer.replaceChildren();
    this.zoneLabels = [];
    this.trailLabels = [];
    this.poiBoxes = [];
    this.categories = null;
    for (const icon of this.icons.values()) void icon.then((url) => url && URL.revokeObjectURL(url));
    this.icons.clear();
    this.setLink(null);
    setText(this.summary, 'No building selected.');
  }

  /** Positions replace one another per device; ones of other buildings are ignored. */
  update(feature: PositionFeature): void {
    if (!this.building || feature.properties.building_id !== this.building.id) return;
    const at = Math.min(Date.parse(feature.properties.time) || Date.now(), Date.now());
    const known = this.devices.get(feature.id);
    if (known && known.at > at) return; // an older fix arriving late
    this.devices.set(feature.id, { feature, at, group: known?.group });
    this.drawDevice(feature.id);
    this.describe();
  }

  /** Re-evaluates staleness (called every second). */
  tick(now = Date.now()): void {
    for (const [id, device] of this.devices) {
      if (now - device.at > FORGET_AFTER_MS) {
        device.group?.remove();
        this.devices.delete(id);
      } else this.drawDevice(id, now);
    }
    if (this.linkLostAt !== null) this.setLink(this.linkLostAt, now);
    this.describe(now);
  }

  /** Marks an alarm's device (and where the alarm was raised); null clears. */
  highlight(deviceId: string | null, position: { x: number; y: number } | null): void {
    this.highlighted = { deviceId, position };
    this.redraw();
  }

  /** The route from a responder to the selected alarm; null clears. */
  setRoute(route: MapRoute | null): void {
    this.overlays.route = route;
    this.drawOverlays();
  }

  /** A device's recent trail; null clears. */
  setTrail(trail: MapTrail | null): void {
    this.overlays.trail = trail;
    this.drawOverlays();
  }

  /** The heatmap of a floor; null clears. */
  setHeat(heat: MapHeat | null): void {
    this.overlays.heat = heat;
    this.drawOverlays();
  }

  private drawOverlays(): void {
    for (const layer of [this.layers.heat, this.layers.trail, this.layers.route]) layer.replaceChildren();
    this.trailLabels = [];
    if (!this.frame || !this.floor) return;
    const floorId = this.floor.id;
    const u = this.unit();
    const { heat, trail, route } = this.overlays;
    if (heat && heat.floorId === floorId && heat.cells.length > 0) {
      const max = Math.max(...heat.cells.map((cell) => cell.weight));
      const side = heat.size * this.frame.scale;
      for (const cell of heat.cells) {
        const [px, py] = this.toPixels(cell.x, cell.y);
        // Opacity from a fifth (one visit) to nearly opaque (the busiest cell): square root, so quiet cells still show.
        const opacity = 0.2 + 0.7 * Math.sqrt(cell.weight / max);
        this.layers.heat.append(
          svg(
            'rect',
            {
              class: 'heat-cell',
              x: px - side / 2,
              y: py - side / 2,
              width: side,
              height: side,
              'fill-opacity': opacity.toFixed(3),
              'data-weight': cell.weight,
            },
            svg('title', {}, `${cell.weight} positions`),
          ),
        );
      }
    }
    if (trail) {
      const here = trail.points.filter((point) => point.floorId === floorId);
      if (here.length > 0) {
        const late = here.filter((point) => point.late).length;
        const group = svg(
          'g',
          { class: 'trail', 'data-device-id': trail.deviceId, 'data-points': here.length, 'data-late': late },
          svg(
            'title',
            {},
            `Trail of ${trail.deviceId}: ${here.length} position${here.length === 1 ? '' : 's'}${late > 0 ? `, ${late} reached us late (dashed)` : ''}`,
          ),
        );
        const line = (run: TrailRun) =>
          svg('polyline', {
            class: run.late ? 'trail-late' : 'trail-on-time',
            points: run.points.map((point) => this.toPixels(point.x, point.y).join(',')).join(' '),
            'stroke-width': u * (run.late ? 0.6 : 0.5),
            ...(run.late ? { 'stroke-dasharray': `${u * 1.4} ${u * 1.1}` } : {}),
          });
        for (const run of trailRuns(here)) {
          if (!run.late) {
            group.append(line(run));
            continue;
          }
          // Said on the map beside the run (placed with the other labels: layoutLabels), and in full in its title.
          const text = lateRunText(run);
          const first = run.lateFixes[0]!;
          const last = run.lateFixes.at(-1)!;
          const taken = first === last ? `taken ${clock(first.at)}` : `taken ${clock(first.at)} to ${clock(last.at)}`;
          const fixes = `${run.lateFixes.length} fix${run.lateFixes.length === 1 ? '' : 'es'}`;
          const fontSize = u * 2.2;
          const label = svg('text', { class: 'trail-late-label', 'font-size': fontSize, 'dominant-baseline': 'middle' }, text);
          this.trailLabels.push({ element: label, options: this.trailLabelOptions(run, text, fontSize) });
          group.append(
            svg(
              'g',
              {
                class: 'trail-late-run',
                'data-late-fixes': run.lateFixes.length,
                'data-delay-ms': Math.max(...run.lateFixes.map((point) => point.delayMs)),
              },
              svg('title', {}, `Reached us ${text}: ${fixes} ${taken}, uploaded from the device's buffer`),
              line(run),
              label,
            ),
          );
        }
        this.layers.trail.append(group);
        this.scheduleLabels();
      }
    }
    if (route) {
      const leg = route.legs.find((candidate) => candidate.floor_id === floorId);
      if (leg && leg.points.length > 0) {
        const points = leg.points.map((point) => this.toPixels(point.x, point.y));
        const [ex, ey] = points[points.length - 1]!;
        this.layers.route.append(
          svg(
            'g',
            { class: 'route' },
            svg('title', {}, route.label),
            svg('polyline', { points: points.map((point) => point.join(',')).join(' '), 'stroke-width': u * 0.8 }),
            svg('circle', { class: 'route-end', cx: ex, cy: ey, r: u * 1.2 }),
          ),
        );
      }
    }
  }

  private redraw(): void {
    this.drawOverlays();
    this.layers.alarm.replaceChildren();
    const { position } = this.highlighted;
    if (this.frame && position) {
      const [px, py] = this.toPixels(position.x, position.y);
      const r = this.unit() * 2.2;
      this.layers.alarm.append(
        svg(
          'g',
          { class: 'alarm-marker' },
          svg('title', {}, 'Where the alarm was raised'),
          svg('path', { d: `M ${px - r} ${py - r} L ${px + r} ${py + r} M ${px - r} ${py + r} L ${px + r} ${py - r}` }),
          svg('circle', { cx: px, cy: py, r: r * 1.4 }),
        ),
      );
    }
    for (const id of this.devices.keys()) this.drawDevice(id);
    this.describe();
  }

  private releaseImage(): void {
    if (this.imageUrl) URL.revokeObjectURL(this.imageUrl);
    this.imageUrl = null;
  }

  /** Metres from the bottom-left corner to SVG user units (y grows downwards on screen). */
  private toPixels(x: number, y: number): [number, number] {
    const { scale, height } = this.frame!;
    return [x * scale, height - y * scale];
  }

  /** A size that reads the same whatever the plan's resolution: a 120th of its larger side. */
  private unit(): number {
    return this.frame ? Math.max(this.frame.width, this.frame.height) / 120 : 1;
  }

  private drawZones(building: BuildingDetail, floorId: number): void {
    const { scale } = this.frame!;
    const u = this.unit();
    for (const zone of building.geofences.filter((g) => g.floor_id === floorId)) {
      const points = zone.cartesians.map(([x, y]) => this.toPixels(x, y));
      const group = svg(
        'g',
        { class: `zone zone-${zone.type.toLowerCase()}`, 'data-zone-id': zone.id },
        svg('title', {}, `${zone.name} (${zone.type.toLowerCase()})`),
      );
      const radius = (zone.radius ?? 0) * scale;
      if (zone.type === 'POLYGON') group.append(svg('polygon', { points: points.map((p) => p.join(',')).join(' ') }));
      else if (zone.type === 'LINE') {
        if (radius > 0)
          group.append(svg('polyline', { class: 'capture', points: points.map((p) => p.join(',')).join(' '), 'stroke-width': radius * 2 }));
        group.append(svg('polyline', { points: points.map((p) => p.join(',')).join(' ') }));
      } else if (points[0]) {
        const [cx, cy] = points[0];
        if (zone.type === 'CIRCLE') group.append(svg('circle', { cx, cy, r: radius }));
        else {
          if (radius > 0) group.append(svg('circle', { class: 'capture', cx, cy, r: radius }));
          group.append(svg('circle', { class: 'point', cx, cy, r: u * 0.6 }));
        }
      }
      // A point's name goes under it; any other zone's name in its middle.
      const [lx, ly] = zone.type === 'POINT' ? [points[0]?.[0] ?? 0, (points[0]?.[1] ?? 0) + u * 2.4] : centroid(points);
      group.append(this.zoneLabel(zone.name, lx, ly, u * 2));
      this.layers.zones.append(group);
    }
    for (const event of building.events.filter((e) => e.position.floor_id === floorId)) {
      const [cx, cy] = this.toPixels(event.position.cartesians.x, event.position.cartesians.y);
      this.layers.zones.append(
        svg(
          'g',
          { class: 'event-area', 'data-event-id': event.id },
          svg('title', {}, `Event area: ${event.name}`),
          svg('circle', { cx, cy, r: event.position.radius * scale }),
          this.zoneLabel(event.name, cx, cy, u * 1.8),
        ),
      );
    }
  }

  /**
   * Points of interest, each with its category's icon (a plain marker until the icon has loaded, or when its
   * category has none) and its name under it.
   */
  private drawPois(building: BuildingDetail, floorId: number): void {
    const u = this.unit();
    const size = u * 4.5;
    for (const poi of building.indoor_pois ?? []) {
      if (poi.position.floor_id !== floorId) continue;
      const [px, py] = this.toPixels(poi.position.cartesians.x, poi.position.cartesians.y);
      const icon = svg('image', { class: 'poi-icon', x: px - size / 2, y: py - size / 2, width: size, height: size });
      const group = svg(
        'g',
        { class: 'poi', 'data-poi-id': poi.id },
        svg('title', {}, poi.name),
        svg('circle', { class: 'poi-marker', cx: px, cy: py, r: size * 0.3 }),
        icon,
      );
      group.append(this.zoneLabel(poi.name, px, py + size, u * 1.6));
      this.layers.pois.append(group);
      this.poiBoxes.push({ x: px - size / 2, y: py - size / 2, width: size, height: size });
      if (poi.category_id === null) continue;
      void this.poiCategories().then(async (categories) => {
        const category = categories.get(poi.category_id!);
        if (!category) return;
        group.dataset.category = category.code;
        setText(group.firstElementChild!, `${poi.name} (${category.name_en})`);
        const url = category.icon_url ? await this.icon(category.icon_url) : null;
        if (!url || !group.isConnected) return;
        icon.setAttribute('href', url);
        group.classList.add('has-icon');
      });
    }
  }

  private poiCategories(): Promise<Map<number, PoiCategory>> {
    this.categories ??= this.api()
      .poiCategories()
      .then((list) => new Map(list.map((category) => [category.id, category])))
      .catch((error: unknown) => {
        console.warn('POI categories not loaded', error);
        this.categories = null; // asked again with the next floor
        return new Map<number, PoiCategory>();
      });
    return this.categories;
  }

  private icon(path: string): Promise<string | null> {
    let url = this.icons.get(path);
    if (!url) {
      url = this.api()
        .imageUrl(path)
        .catch((error: unknown) => {
          console.warn('POI icon not loaded', error);
          this.icons.delete(path);
          return null;
        });
      this.icons.set(path, url);
    }
    return url;
  }

  /** A zone's or event's name centred on (x, y), registered for label placement. */
  private zoneLabel(name: string, x: number, y: number, fontSize: number): SVGTextElement {
    const element = svg(
      'text',
      { class: 'zone-label', x, y, 'font-size': fontSize, 'text-anchor': 'middle', 'dominant-baseline': 'middle' },
      name,
    );
    const width = name.length * fontSize * 0.65;
    this.zoneLabels.push({ element, box: textBox(x - width / 2, y, width, fontSize) });
    return element;
  }

  /** Lays the labels out once after a burst of updates (one microtask), not once per position. */
  private scheduleLabels(): void {
    if (this.labelsDue) return;
    this.labelsDue = true;
    queueMicrotask(() => {
      this.labelsDue = false;
      this.layoutLabels();
    });
  }

  /** Beside the middle segment of a late run first, then the segments further out; above right, else above left. */
  private trailLabelOptions(run: TrailRun, text: string, fontSize: number) {
    const u = this.unit();
    const gap = u * 1.2;
    const width = text.length * fontSize * 0.62;
    const segments = run.points.slice(1).map((point, index) => [run.points[index]!, point] as const);
    const middle = (segments.length - 1) / 2;
    const order = segments.map((_, index) => index).sort((a, b) => Math.abs(a - middle) - Math.abs(b - middle) || a - b);
    return order.flatMap((index) => {
      const [a, b] = segments[index]!;
      const [mx, my] = this.toPixels((a.x + b.x) / 2, (a.y + b.y) / 2);
      const y = my - gap;
      return [
        { box: textBox(mx + gap, y, width, fontSize), x: mx + gap, y, anchor: 'start' as const },
        { box: textBox(mx - gap - width, y, width, fontSize), x: mx - gap, y, anchor: 'end' as const },
      ];
    });
  }

  /**
   * Places every label of the shown floor so that none overlaps another: the selected alarm's device first,
   * then people (devices with a user), then zone and POI names, then other devices, none over a device's dot or
   * a POI icon; each goes right of its dot, else left of it, else it is hidden (its dot's title still names it).
   * The plan scales as a whole, so boxes in user units overlap exactly when they do on screen.
   */
  private layoutLabels(): void {
    if (!this.frame) return;
    const u = this.unit();
    const gap = u * 1.8;
    const candidates: LabelCandidate[] = [];
    const texts = new Map<string, { text: SVGTextElement; group: Element; right: LabelBox; left: LabelBox }>();
    this.zoneLabels.forEach(({ element, box }, index) => {
      if (!element.isConnected) return;
      candidates.push({ id: `zone:${index}`, priority: 1, options: [box] });
      texts.set(`zone:${index}`, { text: element, group: element, right: box, left: box });
    });
    this.poiBoxes.forEach((box, index) => {
      candidates.push({ id: `poi:${index}`, priority: 9, options: [box] });
    });
    // A late stretch's delay: after people's names, before zone names and other devices'.
    this.trailLabels.forEach(({ element, options }, index) => {
      if (element.isConnected) candidates.push({ id: `trail:${index}`, priority: 1.5, options: options.map((option) => option.box) });
    });
    for (const [id, device] of this.devices) {
      const group = device.group;
      if (!group?.isConnected) continue;
      const text = group.lastElementChild as SVGTextElement;
      const dot = group.querySelector('.device-dot')!;
      const px = Number(dot.getAttribute('cx'));
      const py = Number(dot.getAttribute('cy'));
      const fontSize = Number(text.getAttribute('font-size'));
      const width = this.textWidth(text.textContent ?? '', fontSize, text);
      const right = textBox(px + gap, py, width, fontSize);
      const left = textBox(px - gap - width, py, width, fontSize);
      // Right of the dot unless that runs off the plan.
      const options = right.x + right.width > this.frame.width ? [left] : left.x < 0 ? [right] : [right, left];
      // Dots come before any other label: a label never hides another device.
      const r = Number(dot.getAttribute('r'));
      candidates.push({ id: `dot:${id}`, priority: 9, options: [{ x: px - r, y: py - r, width: 2 * r, height: 2 * r }] });
      // The selected alarm's device is named whatever crowds it (over other dots, never over another label).
      // So is the device whose trail is shown, before the delays written along it.
      const priority =
        this.highlighted.deviceId === id ? 10 : this.overlays.trail?.deviceId === id ? 3 : device.feature.properties.user_id ? 2 : 0;
      candidates.push({ id: `device:${id}`, priority, options });
      texts.set(`device:${id}`, { text, group, right, left });
    }
    const placed = placeLabels(candidates);
    this.trailLabels.forEach(({ element, options }, index) => {
      const option = placed.get(`trail:${index}`);
      element.classList.toggle('label-hidden', option === undefined);
      if (option === undefined) return;
      const { x, y, anchor } = options[option]!;
      setAttributes(element, { x, y });
      element.setAttribute('text-anchor', anchor);
    });
    for (const candidate of candidates) {
      if (!texts.has(candidate.id)) continue; // a dot or a POI icon
      const { text, group, right } = texts.get(candidate.id)!;
      const option = placed.get(candidate.id);
      group.classList.toggle('label-hidden', option === undefined);
      if (option === undefined || group === text) continue;
      const onRight = candidate.options[option] === right;
      const dot = group.querySelector('.device-dot')!;
      const px = Number(dot.getAttribute('cx'));
      setAttributes(text, { x: onRight ? px + gap : px - gap });
      if (text.getAttribute('text-anchor') !== (onRight ? 'start' : 'end')) text.setAttribute('text-anchor', onRight ? 'start' : 'end');
    }
  }

  private textWidth(label: string, fontSize: number, text: SVGTextElement): number {
    const key = `${fontSize}|${label}`;
    let width = this.textWidths.get(key);
    if (width === undefined) {
      // Measured where the browser lays SVG out; an estimate (wide bold digits) where it does not.
      const measured = typeof text.getComputedTextLength === 'function' ? text.getComputedTextLength() : 0;
      width = measured > 0 ? measured : label.length * fontSize * 0.7;
      if (this.textWidths.size > 5000) this.textWidths.clear();
      this.textWidths.set(key, width);
    }
    return width;
  }

  private drawDevice(id: string, now = Date.now()): void {
    const device = this.devices.get(id);
    if (!device || !this.frame) return;
    const { properties } = device.feature;
    const here = this.floor !== null && properties.floor_id === this.floor.id && properties.local_coordinates !== null;
    // Outside their tracking window a person's last dot is not where they are: listed as not tracked now instead.
    if (!here || properties.tracked_now === false) {
      device.group?.remove();
      device.group = undefined;
      return;
    }
    const [x, y] = properties.local_coordinates!;
    const [px, py] = this.toPixels(x, y);
    const u = this.unit();
    const stale = now - device.at > STALE_AFTER_MS;
    const user = this.userName(properties.user_id);
    const label = `${user ? `${user} · ${id}` : id}${stale ? ` · stale ${ago(now - device.at)}` : ''}`;
    const highlighted = this.highlighted.deviceId === id;
    let group = device.group;
    if (!group?.isConnected) {
      group = svg('g', { class: 'device', 'data-device-id': id, tabindex: 0, role: 'button' });
      group.addEventListener('click', () => this.selectDevice(id));
      group.addEventListener('keydown', (event) => {
        if ((event as KeyboardEvent).key === 'Enter') this.selectDevice(id);
      });
      group.append(
        svg('title'),
        svg('circle', { class: 'device-accuracy' }),
        svg('circle', { class: 'device-ring' }),
        svg('circle', { class: 'device-dot' }),
        svg('text', { class: 'device-label', 'dominant-baseline': 'middle' }),
      );
      this.layers.devices.append(group);
      device.group = group;
    }
    group.classList.toggle('stale', stale);
    group.classList.toggle('highlighted', highlighted);
    group.dataset.stale = String(stale);
    const [title, accuracy, ring, dot, text] = Array.from(group.children) as [
      SVGTitleElement,
      SVGCircleElement,
      SVGCircleElement,
      SVGCircleElement,
      SVGTextElement,
    ];
    setText(title, `${label} at x ${x.toFixed(1)} m, y ${y.toFixed(1)} m (select to show its trail)`);
    setAttributes(accuracy, { cx: px, cy: py, r: Math.max(0, (properties.accuracy ?? 0) * this.frame.scale) });
    setAttributes(ring, { cx: px, cy: py, r: highlighted ? u * 3 : 0 });
    setAttributes(dot, { cx: px, cy: py, r: u * 1.1 });
    // Where the label goes (right or left of the dot, or hidden) is decided for all labels at once.
    setAttributes(text, { y: py, 'font-size': u * 2.2 });
    if (!text.hasAttribute('x')) setAttributes(text, { x: px + u * 1.8 });
    setText(text, label);
    this.scheduleLabels();
  }

  /** The map's text alternative (also shown under it): what is drawn and how many devices are live or stale. */
  private describe(now = Date.now()): void {
    if (!this.building) return setText(this.summary, 'No building selected.');
    let live = 0;
    let stale = 0;
    let elsewhere = 0;
    const untracked: string[] = [];
    for (const [id, device] of this.devices) {
      if (device.feature.properties.tracked_now === false) {
        const user = this.userName(device.feature.properties.user_id);
        untracked.push(user ? `${user} · ${id}` : id);
      } else if (this.floor && device.feature.properties.floor_id === this.floor.id) {
        if (now - device.at > STALE_AFTER_MS) stale++;
        else live++;
      } else elsewhere++;
    }
    const floorName = this.floor ? this.floor.name || `level ${this.floor.level}` : 'no floor';
    const plan = this.imageUrl ? 'floorplan' : 'plain outline (no floorplan image)';
    // While the link is down nothing is known to be live: say how old the picture is instead.
    const state = this.linkLostAt === null ? 'live' : `as of ${ago(now - this.linkLostAt)} ago (connection lost)`;
    setText(
      this.summary,
      `${this.building.name}, ${floorName}: ${plan}. ${live} device${live === 1 ? '' : 's'} ${state}, ${stale} stale${elsewhere ? `, ${elsewhere} on other floors` : ''}.${untracked.length ? ` Not tracked now: ${untracked.sort().join(', ')}.` : ''}`,
    );
  }
}

/** Lines every `metres` from the bottom-left corner: orientation on a floor that has no plan. */
function grid(frame: Frame, metres: number): SVGPathElement {
  const step = metres * frame.scale;
  const d: string[] = [];
  for (let x = step; x < frame.width; x += step) d.push(`M ${x} 0 V ${frame.height}`);
  for (let y = frame.height - step; y > 0; y -= step) d.push(`M 0 ${y} H ${frame.width}`);
  return svg('path', { class: 'floor-grid', d: d.join(' ') });
}

/** The box of a label whose text starts at x and is centred on y (dominant-baseline middle), with a margin. */
function textBox(x: number, y: number, width: number, fontSize: number): LabelBox {
  const margin = fontSize * 0.15;
  return { x: x - margin, y: y - fontSize * 0.7 - margin, width: width + 2 * margin, height: fontSize * 1.4 + 2 * margin };
}

function setAttributes(element: Element, attributes: Record<string, number>): void {
  for (const [name, value] of Object.entries(attributes)) {
    const text = String(Math.round(value * 1000) / 1000);
    if (element.getAttribute(name) !== text) element.setAttribute(name, text);
  }
}

function centroid(points: [number, number][]): [number, number] {
  if (points.length === 0) return [0, 0];
  const unique =
    points.length > 1 && points[0]![0] === points.at(-1)![0] && points[0]![1] === points.at(-1)![1] ? points.slice(0, -1) : points;
  const sum = unique.reduce(([sx, sy], [x, y]) => [sx + x, sy + y], [0, 0]);
  return [sum[0] / unique.length, sum[1] / unique.length];
}

/** A fix's time of day, as the alarm inbox writes it. */
function clock(at: number): string {
  return new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

export function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

function naturalSize(url: string): Promise<{ width: number; height: number }> {
  const image = new Image();
  image.src = url;
  return image.decode().then(() => ({ width: image.naturalWidth, height: image.naturalHeight }));
}
