/**
 * A bounded map: least recently used entries go first once `maxEntries` is reached, and with `ttlMs` an entry
 * older than that reads as absent. Every in-memory cache keyed by something a client chooses (building ids,
 * device identifiers) uses one, so no request pattern can grow a gateway's memory without limit.
 * A JavaScript Map keeps insertion order, so re-inserting on read makes its first key the least recent.
 */
export interface LruCacheOptions {
  maxEntries: number;
  /** Age past which an entry is treated as missing; unset keeps entries until evicted or deleted. */
  ttlMs?: number;
  now?: () => number;
}

export interface CacheStats {
  size: number;
  maxEntries: number;
  /** Entries dropped to make room since the cache was created. */
  evictions: number;
}

export class LruCache<K, V> {
  private readonly entries = new Map<K, { value: V; storedAt: number }>();
  private readonly now: () => number;
  private evictions = 0;

  constructor(private readonly options: LruCacheOptions) {
    if (!(options.maxEntries >= 1)) throw new Error('an LRU cache holds at least one entry');
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  stats(): CacheStats {
    return { size: this.entries.size, maxEntries: this.options.maxEntries, evictions: this.evictions };
  }

  /** The value, marked as just used; undefined when absent or expired. */
  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (this.expired(entry.storedAt)) {
      this.entries.delete(key);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /** The value without touching its recency; undefined when absent or expired. */
  peek(key: K): V | undefined {
    const entry = this.entries.get(key);
    return entry && !this.expired(entry.storedAt) ? entry.value : undefined;
  }

  has(key: K): boolean {
    return this.peek(key) !== undefined;
  }

  /** When the entry was stored (for callers that refresh in the background rather than expire). */
  storedAt(key: K): number | undefined {
    return this.entries.get(key)?.storedAt;
  }

  set(key: K, value: V): this {
    this.entries.delete(key);
    this.entries.set(key, { value, storedAt: this.now() });
    while (this.entries.size > this.options.maxEntries) {
      const oldest = this.entries.keys().next().value as K;
      this.entries.delete(oldest);
      this.evictions += 1;
    }
    return this;
  }

  delete(key: K): boolean {
    return this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  keys(): IterableIterator<K> {
    return this.entries.keys();
  }

  private expired(storedAt: number): boolean {
    return this.options.ttlMs !== undefined && this.now() - storedAt >= this.options.ttlMs;
  }
}
