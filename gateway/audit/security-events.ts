import type { Logger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import { auditChanges } from './audit-diff.js';

/** What happened: a sign-in's outcome, a refused request, a revoked refresh chain. */
export type SecurityEventKind = 'sign-in' | 'sign-in-failed' | 'refused' | 'refresh-reuse';

export interface SecurityEvent {
  kind: SecurityEventKind;
  organizationId: string;
  userId: string;
  email: string;
  via: string;
  apiKeyId?: string | null;
  method: string;
  route: string;
  address: string;
  /** Why, in a few words (the refusal's message); never a credential. */
  detail?: string;
}

/**
 * Security events in the audit log (object type `security`, object id the event kind): who signed in or
 * failed to, which request was refused, which refresh chain was revoked for reuse. Unlike a write's entry,
 * each is its own statement, outside any transaction: a refusal has no write to commit with. Only events
 * about a known user are kept (an unknown e-mail belongs to no organization). A failure to record is logged,
 * never turned into the request's answer.
 */
export class SecurityAudit {
  constructor(
    private readonly storage: Storage,
    private readonly logger?: Logger,
  ) {}

  async record(event: SecurityEvent): Promise<void> {
    try {
      const changes = auditChanges(null, { outcome: event.kind, ...(event.detail ? { detail: event.detail } : {}) });
      await this.storage.execute(
        `insert into audit_log (organization_id, user_id, user_email, via, api_key_id, method, route, object_type, object_id, changes, address)
         values (?, ?, ?, ?, ?, ?, ?, 'security', ?, ?::jsonb, ?)`,
        [
          event.organizationId,
          event.userId,
          event.email,
          event.via,
          event.apiKeyId ?? null,
          event.method,
          event.route,
          event.kind,
          JSON.stringify(changes),
          event.address,
        ],
      );
    } catch (error) {
      this.logger?.warn({ err: error, kind: event.kind }, 'security event not recorded');
    }
  }
}
