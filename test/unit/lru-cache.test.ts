import { describe, expect, it } from 'vitest';
import { LruCache } from '../../shared/lru-cache.js';

describe('LruCache', () => {
  it('drops the least recently used entry beyond its size, a read counting as a use', () => {
    const cache = new LruCache<string, number>({ maxEntries: 2 });
    cache.set('a', 1).set('b', 2);
    expect(cache.get('a')).toBe(1);
    cache.set('c', 3);
    expect([...cache.keys()].sort()).toEqual(['a', 'c']);
    expect(cache.stats()).toEqual({ size: 2, maxEntries: 2, evictions: 1 });
  });

  it('treats an entry older than its TTL as absent, with an injected clock', () => {
    let now = 0;
    const cache = new LruCache<string, number>({ maxEntries: 10, ttlMs: 1000, now: () => now });
    cache.set('a', 1);
    now = 999;
    expect(cache.get('a')).toBe(1);
    now = 1000;
    expect(cache.has('a')).toBe(false);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });
});
