import { createRequire } from 'node:module';
import type * as UwsTypes from 'uWebSockets.js';

const require = createRequire(import.meta.url);

export type Uws = typeof UwsTypes;

/**
 * Loads uWebSockets.js and proves the native binary is the one in use. The package we depend on silently
 * falls back to a slow pure-JS shim on Node versions it has no binary for; a gateway on the shim would
 * pass every test and then fail under load, so we refuse to start instead.
 */
export function loadNativeUws(): Uws {
  if (/^(true|1)$/i.test(process.env.UWS_USE_FALLBACK ?? '')) {
    throw new Error('UWS_USE_FALLBACK is set: Floorcast needs the native uWebSockets.js binary, not its JS shim');
  }
  const binaryName = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  let binaryPath: string;
  try {
    binaryPath = require.resolve(`uWebSockets.js/binaries/${binaryName}`);
  } catch {
    throw new Error(`uWebSockets.js has no native binary ${binaryName} for Node ${process.version}; use Node 20 (see README)`);
  }
  const uws = require('uWebSockets.js') as Uws;
  if (require.cache[binaryPath]?.exports !== uws) {
    throw new Error(`uWebSockets.js fell back to its JS shim on Node ${process.version}; refusing to start`);
  }
  return uws;
}
