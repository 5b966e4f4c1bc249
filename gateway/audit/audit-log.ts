import type { EntityManager } from '@mikro-orm/postgresql';
import type { Principal } from '../auth/principal.js';
import { auditChanges } from './audit-diff.js';

/** One change to audit: which object, and how it looked before and after (as the API presents it). */
export interface AuditChange {
  /** The collection, e.g. `geofences`, `apikeys`, `alarms`. */
  objectType: string;
  objectId: string | number | null;
  /** null when the object is created. */
  before: unknown;
  /** null when the object is deleted. */
  after: unknown;
  /** The request body, so fields the presentation hides (a password) are still listed, redacted. */
  sent?: unknown;
}

/**
 * The audit entry of one request, handed to its handler. `record` must be called with the entity manager
 * of the write's own transaction: the entry commits or rolls back with the write, never apart from it.
 */
export class AuditRecorder {
  private count = 0;

  constructor(
    private readonly principal: Principal,
    private readonly method: string,
    private readonly route: string,
    private readonly address: string,
  ) {}

  /** Entries recorded so far (the HTTP server checks a successful write left one). */
  get recorded(): number {
    return this.count;
  }

  async record(em: EntityManager, change: AuditChange): Promise<void> {
    if (!em.isInTransaction()) throw new Error(`audit entry of ${this.method} ${this.route} outside the write's transaction`);
    const changes = auditChanges(change.before, change.after, change.sent);
    const p = this.principal;
    await em.execute(
      `insert into audit_log (organization_id, user_id, user_email, via, api_key_id, method, route, object_type, object_id, changes, address)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?)`,
      [
        p.organizationId,
        p.userId,
        p.email,
        p.via,
        p.apiKeyId ?? null,
        this.method,
        this.route,
        change.objectType,
        change.objectId === null ? null : String(change.objectId),
        JSON.stringify(changes),
        this.address,
      ],
    );
    this.count++;
  }
}
