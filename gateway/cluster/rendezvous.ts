/**
 * Which member owns which shard: rendezvous (highest-random-weight) hashing. Every member computes the same
 * answer from the same member list, with no coordination; when a member joins it takes from each other member
 * only the shards it now scores highest on, and when one leaves only its shards move (each to its runner-up).
 *
 * Buildings map onto a fixed number of shards (CLUSTER_SHARDS) rather than being owned one by one: the work of
 * a membership change, the leases to renew and the Redis streams to read grow with the shard count, not with
 * the number of buildings, while 64 shards still spread the load of a few gateways evenly.
 */

/** FNV-1a over UTF-16 code units, then murmur3's finaliser so nearby inputs land far apart. */
export function hash32(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/** The shard of a building. */
export const shardOfBuilding = (buildingId: number, shards: number): number => hash32(`building:${buildingId}`) % shards;

/**
 * The shard of a position with no building (outdoors): by device, so one device's outdoor positions stay in order.
 * They matter to detection only by closing the stays of the building the device left.
 */
export const shardOfDevice = (organizationId: string, deviceId: string, shards: number): number =>
  hash32(`device:${organizationId}|${deviceId}`) % shards;

/** The shard of a position: its building's, else its device's. Its owner detects on it; its bus channel is the shard's. */
export const shardOfPosition = (record: { buildingId: number | null; organizationId: string; deviceId: string }, shards: number): number =>
  record.buildingId !== null ? shardOfBuilding(record.buildingId, shards) : shardOfDevice(record.organizationId, record.deviceId, shards);

/** An upload's positions by shard, each shard's in their upload order (the bus channels and the shard streams). */
export function positionsByShard<R extends { buildingId: number | null; organizationId: string; deviceId: string }>(
  records: readonly R[],
  shards: number,
): Map<number, R[]> {
  const byShard = new Map<number, R[]>();
  for (const record of records) {
    const shard = shardOfPosition(record, shards);
    const list = byShard.get(shard);
    if (list) list.push(record);
    else byShard.set(shard, [record]);
  }
  return byShard;
}

/** The member scoring highest for this shard; ties (astronomically rare) go to the smaller id, so all agree. */
export function ownerOf(shard: number, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const member of members) {
    const score = hash32(`${member}#${shard}`);
    if (score > bestScore || (score === bestScore && best !== undefined && member < best)) {
      best = member;
      bestScore = score;
    }
  }
  return best;
}

/** Shards this member owns among `members`. */
export function shardsOwnedBy(member: string, members: readonly string[], shards: number): number[] {
  const owned: number[] = [];
  for (let shard = 0; shard < shards; shard++) if (ownerOf(shard, members) === member) owned.push(shard);
  return owned;
}
