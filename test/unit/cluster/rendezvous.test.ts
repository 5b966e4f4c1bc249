import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ownerOf, shardOfBuilding, shardsOwnedBy } from '../../../gateway/cluster/rendezvous.js';

const SHARDS = 64;
const memberId = fc.string({ minLength: 1, maxLength: 30 });
const members = fc.uniqueArray(memberId, { minLength: 1, maxLength: 8 });

describe('rendezvous ownership of shards', () => {
  it('gives every shard exactly one owner among the members, whatever their order', () => {
    fc.assert(
      fc.property(members, (list) => {
        const reversed = [...list].reverse();
        for (let shard = 0; shard < SHARDS; shard++) {
          const owner = ownerOf(shard, list);
          expect(list).toContain(owner);
          expect(ownerOf(shard, reversed)).toBe(owner);
        }
        const owned = list.flatMap((member) => shardsOwnedBy(member, list, SHARDS));
        expect(owned.sort((a, b) => a - b)).toEqual([...Array(SHARDS).keys()]);
      }),
      { seed: 16, numRuns: 100 },
    );
  });

  it('moves only the shards a joining member takes, and only the leaving member’s shards when it leaves', () => {
    fc.assert(
      fc.property(members, memberId, (list, joining) => {
        fc.pre(!list.includes(joining));
        const after = [...list, joining];
        for (let shard = 0; shard < SHARDS; shard++) {
          const before = ownerOf(shard, list);
          const now = ownerOf(shard, after);
          // A join: a shard either stays put or goes to the newcomer (never between two old members).
          expect(now === before || now === joining).toBe(true);
          // The leave of the same member undoes it exactly.
          expect(
            ownerOf(
              shard,
              after.filter((member) => member !== joining),
            ),
          ).toBe(before);
        }
      }),
      { seed: 61, numRuns: 200 },
    );
  });

  it('spreads shards and buildings about evenly', () => {
    const three = ['gw-a:1:x', 'gw-b:2:y', 'gw-c:3:z'];
    for (const member of three) expect(shardsOwnedBy(member, three, 300).length).toBeGreaterThan(60);
    const perShard = new Map<number, number>();
    for (let building = 1; building <= 6400; building++)
      perShard.set(shardOfBuilding(building, SHARDS), (perShard.get(shardOfBuilding(building, SHARDS)) ?? 0) + 1);
    expect(perShard.size).toBe(SHARDS);
    for (const count of perShard.values()) expect(count).toBeGreaterThan(50);
  });
});
