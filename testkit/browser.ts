import { existsSync } from 'node:fs';
import { greyscalePng } from '../demo/floorplan-png.js';

/** Debian's Chromium, driven by playwright-core (never a downloaded browser); .ci/run installs it. */
export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
export const hasChromium = existsSync(CHROMIUM);
/** Screenshots the browser tests save, to look at. */
export const ARTIFACTS = new URL('../test-artifacts/', import.meta.url);

/** A floorplan to look at: white, a grid every `pxPerMetre * 10` pixels, thick outer and inner walls. */
export function floorplanPng(width: number, height: number, pxPerMetre: number): Buffer {
  const rows: number[] = [];
  const wall = (x: number, y: number) =>
    x < 6 ||
    y < 6 ||
    x >= width - 6 ||
    y >= height - 6 ||
    (Math.abs(x - width * 0.45) < 3 && y > height * 0.35) ||
    (Math.abs(y - height * 0.35) < 3 && x < width * 0.8);
  for (let y = 0; y < height; y++) {
    rows.push(0);
    for (let x = 0; x < width; x++) rows.push(wall(x, y) ? 40 : x % (pxPerMetre * 10) === 0 || y % (pxPerMetre * 10) === 0 ? 215 : 250);
  }
  return greyscalePng(width, height, Buffer.from(rows));
}
