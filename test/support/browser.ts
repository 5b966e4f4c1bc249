import { existsSync } from 'node:fs';
import { crc32, deflateSync } from 'node:zlib';

/** Debian's Chromium, driven by playwright-core (never a downloaded browser); .ci/run installs it. */
export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
export const hasChromium = existsSync(CHROMIUM);
/** Screenshots the browser tests save, to look at. */
export const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url);

/** A floorplan to look at: white, a grid every `pxPerMetre * 10` pixels, thick outer and inner walls. */
export function floorplanPng(width: number, height: number, pxPerMetre: number): Buffer {
  const rows: number[] = [];
  const wall = (x: number, y: number) =>
    x < 6 || y < 6 || x >= width - 6 || y >= height - 6 || (Math.abs(x - width * 0.45) < 3 && y > height * 0.35) || (Math.abs(y - height * 0.35) < 3 && x < width * 0.8);
  for (let y = 0; y < height; y++) {
    rows.push(0);
    for (let x = 0; x < width; x++) rows.push(wall(x, y) ? 40 : x % (pxPerMetre * 10) === 0 || y % (pxPerMetre * 10) === 0 ? 215 : 250);
  }
  const chunk = (type: string, data: Buffer) => {
    const typed = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(typed));
    return Buffer.concat([length, typed, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 0, 0, 0, 0], 8); // 8-bit greyscale
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', header), chunk('IDAT', deflateSync(Buffer.from(rows))), chunk('IEND', Buffer.alloc(0))]);
}
