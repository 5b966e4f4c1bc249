import { describe, expect, it } from 'vitest';
import { DeviceDirectory } from '../../gateway/realtime/device-directory.js';

const ORG = 'org-1';
const TTL = 60_000;

/**
 * The directory over a fake devices table: `owners` is the table (identifier -> owner), every query is logged,
 * and `hold()` makes the next queries wait until released, to see whether an upload waits for them.
 */
function directoryOverFakes() {
  let now = 1_000_000;
  const owners = new Map<string, string | null>();
  const queries: { sql: string; identifiers: string[] }[] = [];
  let held: Promise<void> | undefined;
  let release = (): void => {};
  let failing = false;
  let afterSelect: (() => void) | undefined;
  const identifiersOf = (literal: string) => literal.slice(2, -2).split('","');
  const storage = {
    execute: async (sql: string, params: unknown[]) => {
      const identifiers = identifiersOf(params[1] as string);
      queries.push({ sql: sql.trim().split(/\s+/)[0]!, identifiers });
      if (held) await held;
      if (failing) throw new Error('database down');
      if (sql.trim().startsWith('insert')) {
        for (const identifier of identifiers) if (!owners.has(identifier)) owners.set(identifier, null);
        return [];
      }
      const rows = identifiers
        .filter((identifier) => owners.has(identifier))
        .map((identifier) => ({ id: `id-${identifier}`, identifier, user_id: owners.get(identifier) ?? null }));
      afterSelect?.();
      return rows;
    },
  };
  const handlers = new Map<string, (payload: unknown) => void>();
  let resync = (): void => {};
  const bus = {
    subscribe: async (channel: string, handler: (payload: unknown) => void) => void handlers.set(channel, handler),
    onResync: (handler: () => void) => (resync = handler),
    publish: async (channel: string, payload: unknown) => handlers.get(channel)?.(payload),
  };
  const directory = new DeviceDirectory(storage as never, bus as never, { ttlMs: TTL, now: () => now, maxDevices: 100 });
  return {
    directory,
    owners,
    queries,
    advance: (ms: number) => (now += ms),
    hold: () => (held = new Promise<void>((resolve) => (release = () => ((held = undefined), resolve())))),
    release: () => release(),
    fail: (value: boolean) => (failing = value),
    /** Runs once a select has read its rows, before they are returned. */
    afterSelect: (hook: (() => void) | undefined) => (afterSelect = hook),
    resync: () => resync(),
    owner: async (identifier: string) => (await directory.resolve(ORG, [identifier]))[0]?.userId,
  };
}

/** Lets the background refresh's promise chain settle. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('device directory', () => {
  it('registers unknown devices in one insert and read, answers repeats and order as asked, then from memory', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    const devices = await fakes.directory.resolve(ORG, ['b', 'a', 'b']);
    expect(devices.map((device) => device?.identifier)).toEqual(['b', 'a', 'b']);
    expect(fakes.queries).toEqual([
      { sql: 'insert', identifiers: ['b', 'a'] },
      { sql: 'select', identifiers: ['b', 'a'] },
    ]);
    await fakes.directory.resolve(ORG, ['a', 'b']);
    expect(fakes.queries).toHaveLength(2);
  });

  it('answers known devices without waiting for the refresh that their age starts', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    await fakes.directory.resolve(ORG, ['a']);
    fakes.advance(TTL / 2);
    fakes.hold();
    // The refresh query is held: the upload is answered anyway, from memory.
    expect((await fakes.directory.resolve(ORG, ['a']))[0]?.identifier).toBe('a');
    expect(fakes.queries.at(-1)).toEqual({ sql: 'select', identifiers: ['a'] });
    fakes.release();
  });

  it('picks up a reassignment nobody announced by the background refresh, within half a TTL', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    expect(await fakes.owner('a')).toBeNull();
    fakes.owners.set('a', 'colleague');
    fakes.advance(TTL / 2 - 1);
    expect(await fakes.owner('a')).toBeNull(); // not due yet
    fakes.advance(1);
    fakes.hold();
    expect(await fakes.owner('a')).toBeNull(); // served while the refresh runs
    fakes.release();
    await settle();
    expect(await fakes.owner('a')).toBe('colleague');
  });

  it('keeps a device in steady use fresh past the TTL without an upload ever reading it', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    await fakes.owner('a');
    for (let step = 0; step < 10; step++) {
      fakes.advance(TTL / 4);
      fakes.hold();
      expect(await fakes.owner('a')).toBeNull(); // would hang if this upload waited for a query
      fakes.release();
      await settle();
    }
    expect(fakes.queries.filter((query) => query.sql === 'insert')).toHaveLength(1);
  });

  it('refreshes only the devices used since the last refresh, and reads an idle one again once it is past the TTL', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    await fakes.directory.resolve(ORG, ['busy', 'idle']);
    fakes.advance(TTL / 2);
    await fakes.owner('busy'); // starts the refresh of both (both used since they were read)
    await settle();
    fakes.advance(TTL / 2);
    await fakes.owner('busy');
    await settle();
    expect(fakes.queries.at(-1)).toEqual({ sql: 'select', identifiers: ['busy'] });
    fakes.owners.set('idle', 'colleague');
    expect(await fakes.owner('idle')).toBeNull(); // read at the first refresh, half a TTL ago
    fakes.advance(TTL / 2);
    expect(await fakes.owner('idle')).toBe('colleague'); // a TTL since: read before use
  });

  it('takes an announced change at once, and a resync drops everything', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    expect(await fakes.owner('a')).toBeNull();
    fakes.owners.set('a', 'colleague');
    await fakes.directory.announce({ organizationId: ORG, identifier: 'a' });
    expect(await fakes.owner('a')).toBe('colleague');
    fakes.owners.set('a', 'someone');
    fakes.resync();
    expect(await fakes.owner('a')).toBe('someone');
    expect(fakes.directory.stats().size).toBe(1);
  });

  it('does not cache rows read across an announced change (the read may predate it)', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    fakes.afterSelect(() => {
      fakes.afterSelect(undefined);
      fakes.owners.set('a', 'colleague'); // changed, and announced, after the read was answered
      void fakes.directory.announce({ organizationId: ORG, identifier: 'a' });
    });
    expect(await fakes.owner('a')).toBeNull();
    expect(await fakes.owner('a')).toBe('colleague');
  });

  it('reads before use once the TTL has passed while refreshes failed, so a lost announcement stays bounded', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    await fakes.owner('a');
    fakes.owners.set('a', 'colleague');
    fakes.fail(true);
    fakes.advance(TTL / 2);
    expect(await fakes.owner('a')).toBeNull(); // its refresh fails (logged), the entry stays until the TTL
    await settle();
    fakes.advance(TTL / 2);
    await expect(fakes.owner('a')).rejects.toThrow('database down'); // past the TTL: this upload reads, and fails
    fakes.fail(false);
    expect(await fakes.owner('a')).toBe('colleague');
  });

  it('forgets a device deleted since it was read', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    await fakes.owner('a');
    fakes.owners.delete('a');
    fakes.advance(TTL / 2);
    await fakes.owner('a');
    await settle();
    expect(fakes.directory.stats().size).toBe(0);
  });

  it('keeps at most maxDevices, evicting from the least recently used organization first', async () => {
    const fakes = directoryOverFakes();
    await fakes.directory.start();
    await fakes.directory.resolve(
      'org-old',
      Array.from({ length: 60 }, (_, i) => `o${i}`),
    );
    await fakes.directory.resolve(
      ORG,
      Array.from({ length: 60 }, (_, i) => `n${i}`),
    );
    expect(fakes.directory.stats()).toMatchObject({ size: 100, maxEntries: 100, evictions: 20 });
    const before = fakes.queries.length;
    await fakes.directory.resolve(
      ORG,
      Array.from({ length: 60 }, (_, i) => `n${i}`),
    );
    expect(fakes.queries).toHaveLength(before); // the recent organization kept all of its own
  });
});
