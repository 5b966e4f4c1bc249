import { rgbaPng } from './floorplan-png.js';

/**
 * The demo's POI categories and their pictograms, drawn here (no image files). Their codes differ from the
 * public categories' (`entrance`, `first-aid`...), which have no icons: found by code, those would be reused.
 */
export interface DemoPoiCategory {
  code: string;
  name: string;
  /** Disc colour, RGB. */
  colour: [number, number, number];
  /** The white symbol, on a square from -1 to 1 (y up): true where it is drawn. */
  symbol: (x: number, y: number) => boolean;
}

const cross = (x: number, y: number) => (Math.abs(x) < 0.18 && Math.abs(y) < 0.55) || (Math.abs(y) < 0.18 && Math.abs(x) < 0.55);

export const DEMO_POI_CATEGORIES: readonly DemoPoiCategory[] = [
  {
    code: 'aed',
    name: 'Defibrillator',
    colour: [0, 122, 61],
    // A heart with a lightning bolt cut through it.
    symbol: (x, y) => {
      const hx = x / 0.62;
      const hy = (y + 0.1) / 0.62;
      const heart = (hx * hx + hy * hy - 1) ** 3 - hx * hx * hy ** 3 < 0;
      const bolt = Math.abs(x - 0.35 * y + (y > 0 ? 0.08 : -0.08)) < 0.08 && Math.abs(y) < 0.5;
      return heart && !bolt;
    },
  },
  { code: 'first_aid', name: 'First aid', colour: [0, 122, 61], symbol: cross },
  {
    code: 'main_entrance',
    name: 'Entrance',
    colour: [0, 90, 170],
    // An arrow pointing right.
    symbol: (x, y) => (Math.abs(y) < 0.15 && x > -0.6 && x < 0.2) || (x >= 0.1 && x < 0.6 && Math.abs(y) < (0.5 * (0.6 - x)) / 0.5),
  },
  {
    code: 'nurses_station',
    name: 'Nurses station',
    colour: [196, 30, 58],
    // A person: head and shoulders, with a small cross on the chest.
    symbol: (x, y) => {
      const head = Math.hypot(x, y - 0.32) < 0.24;
      const body = y < 0.02 && y > -0.62 && Math.hypot(x / 0.6, (y + 0.62) / 0.62) < 1;
      const badge = Math.abs(x) < 0.16 && Math.abs(y + 0.3) < 0.16 && (Math.abs(x) < 0.05 || Math.abs(y + 0.3) < 0.05);
      return head || (body && !badge);
    },
  },
];

/** Which category each demo POI belongs to, by name (the stairs, lift and cafeteria have none). */
export const DEMO_POI_CATEGORY_OF: Readonly<Record<string, string>> = {
  'Main entrance': 'main_entrance',
  Defibrillator: 'aed',
  'First-aid kit': 'first_aid',
  'Nurses station': 'nurses_station',
};

/** A category's icon: a 48 px disc of its colour with its white symbol, transparent around. */
export function poiIconPng(category: DemoPoiCategory, size = 48): Buffer {
  const rows = Buffer.alloc((size * 4 + 1) * size);
  let offset = 0;
  for (let row = 0; row < size; row++) {
    rows[offset++] = 0;
    for (let column = 0; column < size; column++) {
      const x = ((column + 0.5) / size) * 2 - 1;
      const y = 1 - ((row + 0.5) / size) * 2;
      const r = Math.hypot(x, y);
      const pixel: [number, number, number, number] =
        r > 0.98
          ? [0, 0, 0, 0]
          : r > 0.88
            ? [255, 255, 255, 255]
            : category.symbol(x / 0.88, y / 0.88)
              ? [255, 255, 255, 255]
              : [...category.colour, 255];
      rows.set(pixel, offset);
      offset += 4;
    }
  }
  return rgbaPng(size, size, rows);
}
