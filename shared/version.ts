import { readFileSync } from 'node:fs';

/** The package version, read once; it is what GET /api/v1/version answers. */
export const packageVersion: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
