import type { EntityManager } from '@mikro-orm/postgresql';
import type { Storage } from '../../shared/storage/index.js';

/**
 * The cartography queries the ORM does not say as well: an image's width and its users, and the path graph's
 * upsert. The routes call these and hold no SQL.
 */

/**
 * The pixel width of an image of the organization (`null` when unknown), or `undefined` when there is no such
 * image. Takes the write's own entity manager: the write is a transaction, and PGlite has a single connection.
 */
export async function imageWidth(em: EntityManager, organizationId: string, imageId: string): Promise<number | null | undefined> {
  const [image] = await em.execute<{ width: number | null }[]>('select width from images where id = ? and organization_id = ?', [
    imageId,
    organizationId,
  ]);
  return image?.width;
}

/** One user of an image, described for a 409 (`floor 3`, `building 1`, `POI category 7`), or `undefined` when unused. */
export async function imageUser(storage: Pick<Storage, 'execute'>, organizationId: string, imageId: string): Promise<string | undefined> {
  const [use] = await storage.execute<{ what: string }>(
    `select 'floor ' || id as what from floors where map_id = ? and organization_id = ?
     union all select 'building ' || id from buildings where picture_id = ? and organization_id = ?
     union all select 'POI category ' || id from poi_categories where (icon_id = ? or selected_icon_id = ?) and organization_id = ?
     limit 1`,
    [imageId, organizationId, imageId, organizationId, imageId, imageId, organizationId],
  );
  return use?.what;
}

/**
 * Replaces a building's path graph in one upsert inside `tx`: two writers at once both succeed and the last wins
 * whole (a find-then-insert raced on the key). Bound, not inlined: the arrays can be large.
 */
export async function upsertPaths(
  tx: EntityManager,
  paths: { buildingId: number; organizationId: string; nodes: readonly unknown[]; links: readonly unknown[] },
): Promise<void> {
  await tx
    .getKnex()
    .raw(
      `insert into building_paths (building_id, organization_id, nodes, links, updated_at) values (?, ?::uuid, ?::jsonb, ?::jsonb, now())
       on conflict (building_id) do update set nodes = excluded.nodes, links = excluded.links, updated_at = excluded.updated_at`,
      [paths.buildingId, paths.organizationId, JSON.stringify(paths.nodes), JSON.stringify(paths.links)],
    )
    .transacting(tx.getTransactionContext()!);
}
