/**
 * A binary min-heap of integer items keyed by a float priority, in typed arrays (no object per entry), for the
 * path searches. Stale entries are allowed: a search pushes a node again when its cost improves and skips the
 * old entry when it pops (lazy deletion), so there is no decrease-key.
 */
export class MinHeap {
  private items: Int32Array;
  private keys: Float64Array;
  size = 0;

  constructor(capacity = 64) {
    this.items = new Int32Array(capacity);
    this.keys = new Float64Array(capacity);
  }

  push(item: number, key: number): void {
    if (this.size === this.items.length) this.grow();
    let index = this.size++;
    // Sift up.
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (this.keys[parent]! <= key) break;
      this.items[index] = this.items[parent]!;
      this.keys[index] = this.keys[parent]!;
      index = parent;
    }
    this.items[index] = item;
    this.keys[index] = key;
  }

  /** The key of the smallest entry (Infinity when empty). */
  peekKey(): number {
    return this.size === 0 ? Infinity : this.keys[0]!;
  }

  /** Removes and returns the item with the smallest key; call only when `size > 0`. */
  pop(): number {
    const top = this.items[0]!;
    const last = --this.size;
    if (last > 0) {
      const item = this.items[last]!;
      const key = this.keys[last]!;
      let index = 0;
      // Sift down.
      for (;;) {
        let child = 2 * index + 1;
        if (child >= last) break;
        if (child + 1 < last && this.keys[child + 1]! < this.keys[child]!) child++;
        if (this.keys[child]! >= key) break;
        this.items[index] = this.items[child]!;
        this.keys[index] = this.keys[child]!;
        index = child;
      }
      this.items[index] = item;
      this.keys[index] = key;
    }
    return top;
  }

  private grow(): void {
    const items = new Int32Array(this.items.length * 2);
    const keys = new Float64Array(this.keys.length * 2);
    items.set(this.items);
    keys.set(this.keys);
    this.items = items;
    this.keys = keys;
  }
}
