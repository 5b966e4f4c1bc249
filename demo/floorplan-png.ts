import { crc32, deflateSync } from 'node:zlib';
import {
  BRANCHES,
  CORRIDOR_Y,
  DEMO_LENGTH_M,
  DEMO_WIDTH_M,
  LIFT_X,
  MAIN_ENTRANCE_X,
  NORTH_PARTITIONS,
  SOUTH_PARTITIONS,
  STAIRS_X,
  WEST_DOOR,
} from './venue.js';

const WALL = 40;
const GRID = 225;
const ROOM = 250;
const CORRIDOR = 236;
const STAIRS = 150;
const LIFT = 120;

/**
 * The demo floorplan as an 8-bit greyscale PNG, drawn from the venue's numbers (no image library): outer walls,
 * the corridor (shaded) with a door where each branch leaves it, room partitions, stairs (hatched) and the lift.
 * Floor coordinates start at the bottom-left, image rows at the top, hence the flip.
 */
export function demoFloorplanPng(pxPerMetre = 10): Buffer {
  const width = DEMO_WIDTH_M * pxPerMetre;
  const height = DEMO_LENGTH_M * pxPerMetre;
  const half = 0.25; // wall half-thickness, metres
  const corridorHalf = 3;
  const near = (a: number, b: number, d = half) => Math.abs(a - b) <= d;
  const door = (x: number, north: boolean) => BRANCHES.some((branch) => branch.y > CORRIDOR_Y === north && Math.abs(branch.x - x) <= 1);
  const shade = (x: number, y: number): number => {
    // Outer walls, with the west door at the corridor's end and the main entrance's outer door.
    const westDoor = x < half * 2 && Math.abs(y - WEST_DOOR.y) < 2;
    const southDoor = y < half * 2 && Math.abs(x - MAIN_ENTRANCE_X) < 3;
    if (westDoor || southDoor) return CORRIDOR;
    if (x < half * 2 || y < half * 2 || x > DEMO_WIDTH_M - half * 2 || y > DEMO_LENGTH_M - half * 2) return WALL;
    const north = CORRIDOR_Y + corridorHalf;
    const south = CORRIDOR_Y - corridorHalf;
    if (near(y, north) && !door(x, true)) return WALL;
    if (near(y, south) && !door(x, false) && !(Math.abs(x - MAIN_ENTRANCE_X) < 3)) return WALL; // the main entrance faces the corridor
    if (y > north && NORTH_PARTITIONS.some((p) => near(x, p))) return WALL;
    if (y < south && SOUTH_PARTITIONS.some((p) => near(x, p))) return WALL;
    if (Math.abs(x - STAIRS_X) < 2.5 && Math.abs(y - CORRIDOR_Y) < 2.5) return Math.floor(x * 2) % 2 === 0 ? STAIRS : CORRIDOR;
    if (Math.abs(x - LIFT_X) < 2.5 && Math.abs(y - CORRIDOR_Y) < 2.5)
      return near(Math.abs(x - LIFT_X), 2.5, 0.3) || near(Math.abs(y - CORRIDOR_Y), 2.5, 0.3) ? WALL : LIFT;
    if (y > south && y < north) return CORRIDOR;
    return ROOM;
  };
  const rows = Buffer.alloc((width + 1) * height);
  let offset = 0;
  for (let row = 0; row < height; row++) {
    rows[offset++] = 0; // filter: none
    const y = DEMO_LENGTH_M - (row + 0.5) / pxPerMetre;
    for (let column = 0; column < width; column++) {
      const x = (column + 0.5) / pxPerMetre;
      const value = shade(x, y);
      rows[offset++] = value === ROOM && (column % (pxPerMetre * 5) === 0 || row % (pxPerMetre * 5) === 0) ? GRID : value;
    }
  }
  return greyscalePng(width, height, rows);
}

/** An 8-bit greyscale PNG from its filtered rows (each row a filter byte, then one byte a pixel). */
export function greyscalePng(width: number, height: number, rows: Buffer): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 0, 0, 0, 0], 8); // 8-bit greyscale, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** An 8-bit RGBA PNG from its filtered rows (each row a filter byte, then four bytes a pixel). */
export function rgbaPng(width: number, height: number, rows: Buffer): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 6, 0, 0, 0], 8); // 8-bit RGBA, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function chunk(type: string, data: Buffer): Buffer {
  const typed = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typed));
  return Buffer.concat([length, typed, crc]);
}
