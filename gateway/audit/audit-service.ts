import { csvChunks, type CsvValue } from '../../shared/csv/csv.js';
import type { Storage } from '../../shared/storage/index.js';

export interface AuditQuery {
  object_type?: string;
  object_id?: string;
  user_id?: string;
  from_date?: string;
  to_date?: string;
}

export interface AuditRow {
  id: string;
  at: Date | string;
  user_id: string | null;
  user_email: string | null;
  via: string;
  api_key_id: string | null;
  method: string;
  route: string;
  object_type: string;
  object_id: string | null;
  changes: unknown;
  address: string | null;
}

export const AUDIT_CSV_HEADER = [
  'id',
  'at',
  'user_id',
  'user_email',
  'via',
  'api_key_id',
  'method',
  'route',
  'object_type',
  'object_id',
  'before',
  'after',
  'address',
];

const json = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value) as { before: unknown; after: unknown };

export function presentAudit(row: AuditRow) {
  const changes = json(row.changes);
  return {
    id: Number(row.id),
    at: new Date(row.at).toISOString(),
    user_id: row.user_id,
    user_email: row.user_email,
    via: row.via,
    api_key_id: row.api_key_id,
    method: row.method,
    route: row.route,
    object_type: row.object_type,
    object_id: row.object_id,
    before: changes.before ?? null,
    after: changes.after ?? null,
    address: row.address,
  };
}

/** Reads the audit log of an organization (newest first); its retention is the organization's (gateway/privacy/retention-sweep.ts). */
export class AuditService {
  constructor(private readonly storage: Storage) {}

  private where(organizationId: string, query: AuditQuery): { sql: string; params: unknown[] } {
    const where = ['organization_id = ?'];
    const params: unknown[] = [organizationId];
    const add = (condition: string, value: unknown) => (where.push(condition), params.push(value));
    if (query.object_type) add('object_type = ?', query.object_type);
    if (query.object_id) add('object_id = ?', query.object_id);
    if (query.user_id) add('user_id = ?', query.user_id);
    if (query.from_date) add('at >= ?', new Date(query.from_date));
    if (query.to_date) add('at < ?', new Date(query.to_date));
    return { sql: where.join(' and '), params };
  }

  async page(organizationId: string, query: AuditQuery, page: number, size: number): Promise<{ rows: AuditRow[]; total: number }> {
    const { sql, params } = this.where(organizationId, query);
    const [{ total }] = (await this.storage.execute<{ total: number }>(
      `select count(*)::int as total from audit_log where ${sql}`,
      params,
    )) as [{ total: number }];
    const rows = await this.storage.execute<AuditRow>(`select * from audit_log where ${sql} order by id desc limit ? offset ?`, [
      ...params,
      size,
      page * size,
    ]);
    return { rows, total };
  }

  /** The CSV, newest first (by id, the insert order; a keyset on the microsecond `at` would lose precision in JS dates), read in keyset pages so memory does not grow with the log. */
  csv(organizationId: string, query: AuditQuery, pageSize = 1000): AsyncIterable<string> {
    const { sql, params } = this.where(organizationId, query);
    const storage = this.storage;
    async function* pages(): AsyncGenerator<Iterable<readonly CsvValue[]>> {
      let after: string | undefined;
      for (;;) {
        const keyset = after ? ' and id < ?' : '';
        const rows = await storage.execute<AuditRow>(`select * from audit_log where ${sql}${keyset} order by id desc limit ?`, [
          ...params,
          ...(after ? [after] : []),
          pageSize,
        ]);
        yield rows.map((row) => {
          const entry = presentAudit(row);
          return [
            entry.id,
            entry.at,
            entry.user_id,
            entry.user_email,
            entry.via,
            entry.api_key_id,
            entry.method,
            entry.route,
            entry.object_type,
            entry.object_id,
            JSON.stringify(entry.before),
            JSON.stringify(entry.after),
            entry.address,
          ];
        });
        if (rows.length < pageSize) return;
        after = rows[rows.length - 1]!.id;
      }
    }
    return csvChunks(AUDIT_CSV_HEADER, pages());
  }
}
