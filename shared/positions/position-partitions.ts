import type { Storage } from '../storage/storage.js';

/** The name of the day partition of positions starting at `dayStart` (UTC midnight): `positions_pYYYYMMDD`. */
export const partitionName = (dayStart: number) => `positions_p${new Date(dayStart).toISOString().slice(0, 10).replace(/-/g, '')}`;

export interface PositionPartition {
  name: string;
  /** The UTC midnight its day starts at; null for a partition not named by `partitionName` (its bounds unknown here). */
  day: number | null;
}

/**
 * The partitions of positions (day partitions created by the position store), oldest first. A statement that names
 * one is planned over that partition alone, where one on the parent is planned over every partition its bounds do
 * not exclude: past a few weeks that planning costs more than a short batch itself (bench/README.md, erasure).
 */
export async function positionPartitions(storage: Pick<Storage, 'execute'>): Promise<PositionPartition[]> {
  const rows = await storage.execute<{ name: string }>(
    `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
     where p.relname = 'positions' order by c.relname`,
  );
  return rows.map(({ name }) => {
    const match = /^positions_p(\d{4})(\d{2})(\d{2})$/.exec(name);
    return { name, day: match ? Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) : null };
  });
}

/** Whether a partition listed a moment ago is gone (dropped meanwhile by the position store's retention). */
export async function partitionGone(storage: Pick<Storage, 'execute'>, name: string): Promise<boolean> {
  return (await storage.execute('select 1 from pg_class where relname = ?', [name])).length === 0;
}
