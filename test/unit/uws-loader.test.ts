import { afterEach, describe, expect, it } from 'vitest';
import { loadNativeUws } from '../../gateway/http/uws.js';

describe('uWebSockets.js loader', () => {
  const saved = process.env.UWS_USE_FALLBACK;
  afterEach(() => {
    if (saved === undefined) delete process.env.UWS_USE_FALLBACK;
    else process.env.UWS_USE_FALLBACK = saved;
  });

  it('loads the native binary on this Node', () => {
    const uws = loadNativeUws();
    expect(typeof uws.App).toBe('function');
    expect(typeof uws.us_socket_local_port).toBe('function');
  });

  it('refuses to run on the slow JS fallback', () => {
    process.env.UWS_USE_FALLBACK = '1';
    expect(() => loadNativeUws()).toThrow(/JS shim/);
  });
});
