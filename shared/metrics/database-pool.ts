import type { Storage } from '../storage/storage.js';
import type { MetricSources } from './metrics.js';

/** The part of knex's tarn pool the metrics read. */
interface TarnPool {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
}

/**
 * The PostgreSQL server pool's connections in use, waited for and free, read at scrape time. Undefined on the
 * embedded database (one in-process connection, no pool to watch).
 */
export function databasePoolSource(storage: Storage): MetricSources['databasePool'] {
  if (storage.kind !== 'server') return undefined;
  return () => {
    const pool = (storage.orm.em.getConnection().getKnex().client as { pool?: TarnPool }).pool;
    return pool ? { used: pool.numUsed(), pending: pool.numPendingAcquires(), free: pool.numFree() } : undefined;
  };
}
