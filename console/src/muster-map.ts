import type { Api } from './api.js';
import { h, setText, svg } from './dom.js';
import type { AssemblyPoint, RollEntry } from './evacuation-model.js';
import { placeLabels, type LabelBox, type LabelCandidate } from './map-labels.js';
import type { BuildingDetail, Floor, Route } from './model.js';

/** What one drawing shows: the missing on each floor, the points' counts, the selected person and their route. */
export interface MusterScene {
  missing: ReadonlyMap<number, readonly RollEntry[]>;
  pointCounts: ReadonlyMap<string, number>;
  selected: string | null;
  route: Route | null;
  label: (entry: RollEntry) => string;
}

/** Past this many missing on a floor, only the selected one is named on the plan (the list names them all). */
const NAMED_UP_TO = 20;
/** Type sizes in hundredths of the drawing's larger side. */
const POINT_FONT = 4;
const PERSON_FONT = 3.2;

interface FloorFigure {
  floor: Floor;
  figure: HTMLElement;
  caption: HTMLElement;
  root: SVGSVGElement;
  plan: SVGGElement;
  points: SVGGElement;
  route: SVGGElement;
  people: SVGGElement;
  /** The dot drawn for each person, and what it showed. */
  dots: Map<string, { group: SVGGElement; signature: string }>;
}

/**
 * The floors of an evacuated building side by side, each drawn in metres (y up, as floor coordinates): its plan,
 * its assembly points (green, with how many reached each) and the missing at their last known place (red), the
 * selected one ringed with the rescuers' route to them. Floors with nobody missing and no assembly point are left
 * out; every floor's figure is built once and redrawn in place.
 */
export class MusterMaps {
  private building: BuildingDetail | null = null;
  private assemblyPoints: AssemblyPoint[] = [];
  private readonly figures = new Map<number, FloorFigure>();
  private readonly imageUrls: string[] = [];
  private token = 0;

  constructor(
    private readonly container: HTMLElement,
    private readonly api: () => Api,
    private readonly select: (entry: string) => void,
  ) {}

  setBuilding(building: BuildingDetail, points: AssemblyPoint[]): void {
    if (this.building?.id === building.id) return;
    this.clear();
    this.building = building;
    this.assemblyPoints = points;
  }

  clear(): void {
    ++this.token;
    for (const url of this.imageUrls.splice(0)) URL.revokeObjectURL(url);
    this.figures.clear();
    this.container.replaceChildren();
    this.building = null;
    this.assemblyPoints = [];
  }

  draw(scene: MusterScene, floorName: (floor: Floor) => string): void {
    const building = this.building;
    if (!building) return;
    const floors = [...building.floors]
      .sort((a, b) => a.level - b.level)
      .filter((floor) => (scene.missing.get(floor.id)?.length ?? 0) > 0 || this.assemblyPoints.some((p) => p.floor_id === floor.id));
    const figures = floors.map((floor) => this.figure(floor));
    if (
      figures.some((figure, index) => this.container.children[index] !== figure.figure) ||
      this.container.children.length !== figures.length
    )
      this.container.replaceChildren(...figures.map((figure) => figure.figure));
    for (const figure of figures) this.drawFloor(figure, scene, floorName);
  }

  private figure(floor: Floor): FloorFigure {
    let figure = this.figures.get(floor.id);
    if (figure) return figure;
    const root = svg('svg', { class: 'muster-floor-map', role: 'img', preserveAspectRatio: 'xMidYMid meet' });
    const layers = {
      plan: svg('g', { class: 'muster-plan' }),
      points: svg('g', { class: 'muster-points' }),
      route: svg('g', { class: 'muster-route' }),
      people: svg('g', { class: 'muster-people' }),
    };
    root.append(layers.plan, layers.points, layers.route, layers.people);
    const caption = h('figcaption');
    figure = {
      floor,
      figure: h('figure', { class: 'muster-floor', 'data-floor-id': floor.id }, caption, root),
      caption,
      root,
      ...layers,
      dots: new Map(),
    };
    this.figures.set(floor.id, figure);
    void this.loadPlan(figure);
    return figure;
  }

  /** The floor's plan, drawn under everything once it has loaded (a grey outline of the building until then). */
  private async loadPlan(figure: FloorFigure): Promise<void> {
    const building = this.building!;
    const { width, length } = building.dimensions;
    figure.plan.append(svg('rect', { class: 'muster-outline', x: 0, y: 0, width, height: length }));
    const { map_url: url, scale } = figure.floor.maps;
    if (!url) return;
    const token = this.token;
    try {
      const blob = await this.api().imageUrl(url);
      if (token !== this.token) return URL.revokeObjectURL(blob);
      this.imageUrls.push(blob);
      const image = new Image();
      image.src = blob;
      await image.decode();
      if (token !== this.token) return;
      const pxPerMetre = scale ?? image.naturalWidth / width;
      const w = image.naturalWidth / pxPerMetre;
      const hgt = image.naturalHeight / pxPerMetre;
      // Floor coordinates start at the bottom-left corner: the plan's bottom edge is y = 0.
      figure.plan.append(
        svg('image', { class: 'muster-plan-image', href: blob, x: 0, y: length - hgt, width: w, height: hgt, preserveAspectRatio: 'none' }),
      );
    } catch (error) {
      console.warn('floorplan not loaded', error);
    }
  }

  private drawFloor(figure: FloorFigure, scene: MusterScene, floorName: (floor: Floor) => string): void {
    const building = this.building!;
    const length = building.dimensions.length;
    const flip = (y: number) => length - y;
    const floorId = figure.floor.id;
    const missing = scene.missing.get(floorId) ?? [];
    const points = this.assemblyPoints.filter((point) => point.floor_id === floorId);
    // The view takes in the building and every assembly point (they often lie outside it) and everyone missing.
    const xs = [0, building.dimensions.width];
    const ys = [0, length];
    for (const point of points) {
      const r = point.type === 'CIRCLE' ? (point.radius ?? 0) : 0;
      for (const [x, y] of point.cartesians) xs.push(x - r, x + r), ys.push(y - r, y + r);
    }
    for (const entry of missing) {
      if (entry.last_position?.x != null && entry.last_position.y != null) xs.push(entry.last_position.x), ys.push(entry.last_position.y);
    }
    const base = Math.max(Math.max(...xs) - Math.min(...xs), Math.max(...ys) - Math.min(...ys), 1);
    const u = base / 100;
    // Room for the points' names, written across their middle (they often stand at the edge of the view).
    for (const point of points) {
      const [cx] = point.type === 'CIRCLE' ? point.cartesians[0]! : centroid(point.cartesians);
      const half = (`${point.name} · 000`.length * u * POINT_FONT * 0.62) / 2;
      xs.push(cx - half, cx + half);
    }
    const middle = (Math.min(...xs) + Math.max(...xs)) / 2;
    const placed = missing.filter((entry) => entry.last_position?.x != null && entry.last_position.y != null);
    const names = this.placeNames(placed, scene, u, middle, flip);
    // ... and the names of the missing, wherever they were placed.
    for (const { box } of names.values()) xs.push(box.x, box.x + box.width);
    const span = Math.max(Math.max(...xs) - Math.min(...xs), Math.max(...ys) - Math.min(...ys), 1);
    const margin = span * 0.04;
    const minX = Math.min(...xs) - margin;
    const maxY = Math.max(...ys) + margin;
    const viewBox = [minX, flip(maxY), Math.max(...xs) + margin - minX, maxY - (Math.min(...ys) - margin)]
      .map((n) => n.toFixed(2))
      .join(' ');
    if (figure.root.getAttribute('viewBox') !== viewBox) figure.root.setAttribute('viewBox', viewBox);
    const name = floorName(figure.floor);
    setText(figure.caption, `${name}: ${missing.length === 0 ? 'nobody missing' : `${missing.length} missing`}`);
    figure.figure.classList.toggle('clear', missing.length === 0);
    figure.root.setAttribute(
      'aria-label',
      `${name}: ${missing.length} missing, ${points.length} assembly point${points.length === 1 ? '' : 's'}`,
    );

    figure.points.replaceChildren(
      ...points.map((point) => {
        const count = scene.pointCounts.get(point.id) ?? 0;
        const ring = point.cartesians.map(([x, y]) => `${x},${flip(y)}`).join(' ');
        const [cx, cy] = point.type === 'CIRCLE' ? point.cartesians[0]! : centroid(point.cartesians);
        return svg(
          'g',
          { class: 'muster-point', 'data-point-id': point.id, 'data-count': count },
          svg('title', {}, `Assembly point ${point.name}: ${count} here`),
          point.type === 'CIRCLE' ? svg('circle', { cx, cy: flip(cy), r: point.radius ?? 0 }) : svg('polygon', { points: ring }),
          svg(
            'text',
            { x: cx, y: flip(cy), 'font-size': u * POINT_FONT, 'text-anchor': 'middle', 'dominant-baseline': 'middle' },
            `${point.name} · ${count}`,
          ),
        );
      }),
    );

    const leg = scene.route?.legs.find((candidate) => candidate.floor_id === floorId);
    figure.route.replaceChildren(
      ...(leg && leg.points.length > 1
        ? [svg('polyline', { points: leg.points.map((p) => `${p.x},${flip(p.y)}`).join(' '), 'stroke-width': u * 0.7 })]
        : []),
    );

    // Each person's dot is kept while it shows the same (a roll of thousands redraws only who changed).
    const keep = new Set<string>();
    for (const entry of placed) {
      const place = entry.last_position!;
      const [x, y] = [place.x!, flip(place.y!)];
      const selected = entry.entry === scene.selected;
      const label = scene.label(entry);
      const side = names.get(entry.entry)?.side ?? null;
      const signature = `${x}|${y}|${u}|${selected}|${side}|${label}`;
      keep.add(entry.entry);
      const held = figure.dots.get(entry.entry);
      if (held?.signature === signature) continue;
      const group = svg(
        'g',
        { class: `muster-person${selected ? ' selected' : ''}`, 'data-entry': entry.entry, tabindex: 0, role: 'button' },
        svg('title', {}, `${label}: last seen here (select for the rescue route)`),
        ...(selected ? [svg('circle', { class: 'muster-ring', cx: x, cy: y, r: u * 3.2 })] : []),
        svg('circle', { class: 'muster-dot', cx: x, cy: y, r: u * 1.6 }),
        ...(side
          ? [
              svg(
                'text',
                {
                  x: x + (side === 'left' ? -u * 2.4 : u * 2.4),
                  y,
                  'font-size': u * PERSON_FONT,
                  'text-anchor': side === 'left' ? 'end' : 'start',
                  'dominant-baseline': 'middle',
                },
                label,
              ),
            ]
          : []),
      );
      group.addEventListener('click', () => this.select(entry.entry));
      group.addEventListener('keydown', (event) => {
        if ((event as KeyboardEvent).key === 'Enter') this.select(entry.entry);
      });
      held?.group.remove();
      // Appended: a changed dot (the selected one among them) is drawn over the others.
      figure.people.append(group);
      figure.dots.set(entry.entry, { group, signature });
    }
    for (const [key, held] of figure.dots) {
      if (keep.has(key)) continue;
      held.group.remove();
      figure.dots.delete(key);
    }
  }

  /**
   * Which side of its dot each name goes (the selected person first), so that no two names overlap and none
   * covers a dot; a name with no room is left out (its dot's title and the list still name it). Towards the middle
   * first, so a name by the wall is not cut off.
   */
  private placeNames(
    placed: readonly RollEntry[],
    scene: MusterScene,
    u: number,
    middle: number,
    flip: (y: number) => number,
  ): Map<string, { side: 'left' | 'right'; box: LabelBox }> {
    // Too many to name: only the selected one is (no placement among thousands of dots).
    const named = placed.length <= NAMED_UP_TO;
    const entries = named ? placed : placed.filter((entry) => entry.entry === scene.selected);
    const candidates: LabelCandidate[] = [];
    const sides = new Map<string, ('left' | 'right')[]>();
    const height = u * PERSON_FONT * 1.3;
    for (const entry of entries) {
      const x = entry.last_position!.x!;
      const y = flip(entry.last_position!.y!);
      candidates.push({
        id: `dot:${entry.entry}`,
        priority: 9,
        options: [{ x: x - u * 1.6, y: y - u * 1.6, width: u * 3.2, height: u * 3.2 }],
      });
      const selected = entry.entry === scene.selected;
      const width = scene.label(entry).length * u * PERSON_FONT * 0.58;
      const right: LabelBox = { x: x + u * 2.4, y: y - height / 2, width, height };
      const left: LabelBox = { x: x - u * 2.4 - width, y: y - height / 2, width, height };
      const order: ('left' | 'right')[] = x > middle ? ['left', 'right'] : ['right', 'left'];
      sides.set(entry.entry, order);
      candidates.push({ id: entry.entry, priority: selected ? 10 : 1, options: order.map((side) => (side === 'left' ? left : right)) });
    }
    const chosen = placeLabels(candidates);
    const result = new Map<string, { side: 'left' | 'right'; box: LabelBox }>();
    for (const candidate of candidates) {
      const option = chosen.get(candidate.id);
      const order = sides.get(candidate.id);
      if (order && option !== undefined) result.set(candidate.id, { side: order[option]!, box: candidate.options[option]! });
    }
    return result;
  }
}

function centroid(points: [number, number][]): [number, number] {
  const ring =
    points.length > 1 && points[0]![0] === points.at(-1)![0] && points[0]![1] === points.at(-1)![1] ? points.slice(0, -1) : points;
  const [sx, sy] = ring.reduce(([ax, ay], [x, y]) => [ax + x, ay + y], [0, 0]);
  return [sx / Math.max(ring.length, 1), sy / Math.max(ring.length, 1)];
}
