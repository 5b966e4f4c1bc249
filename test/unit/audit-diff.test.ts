import { describe, expect, it } from 'vitest';
import { auditChanges, isSecretField, redact, REDACTED } from '../../gateway/audit/audit-diff.js';

describe('audit diff', () => {
  it('recognises secret field names, but not the ids of secret things', () => {
    for (const name of [
      'password',
      'passwordHash',
      'password_hash',
      'keyHash',
      'key_hash',
      'apikey',
      'api_key',
      'secret',
      'webhook_secret',
      'refresh_token',
      'access_token',
      'signature',
    ]) {
      expect(isSecretField(name), name).toBe(true);
    }
    for (const name of ['name', 'email', 'api_key_id', 'apiKeyId', 'user_id', 'description', 'permission'])
      expect(isSecretField(name), name).toBe(false);
  });

  it('redacts secrets at any depth and keeps nulls', () => {
    expect(redact({ a: 1, password: 'p', nested: { secret: 's', ok: [{ token: 't', x: 2 }] }, gone: null, token: null })).toEqual({
      a: 1,
      password: REDACTED,
      nested: { secret: REDACTED, ok: [{ token: REDACTED, x: 2 }] },
      gone: null,
      token: null,
    });
  });

  it('keeps only the changed fields of an update', () => {
    expect(auditChanges({ id: 1, name: 'a', tags: ['x'], same: { k: 1 } }, { id: 1, name: 'b', tags: ['x', 'y'], same: { k: 1 } })).toEqual(
      {
        before: { name: 'a', tags: ['x'] },
        after: { name: 'b', tags: ['x', 'y'] },
      },
    );
  });

  it('shows a secret the presentation hides as changed, redacted, never its value', () => {
    const changes = auditChanges({ id: 'u', email: 'e' }, { id: 'u', email: 'e' }, { password: 'hunter22', full_name: 'x' });
    expect(changes).toEqual({ before: { password: REDACTED }, after: { password: REDACTED } });
    expect(JSON.stringify(auditChanges(null, { id: 'u' }, { password: 'hunter22' }))).not.toContain('hunter22');
  });

  it('a creation has no before, a deletion no after', () => {
    expect(auditChanges(null, { id: 1, name: 'n' })).toEqual({ before: null, after: { id: 1, name: 'n' } });
    expect(auditChanges({ id: 1, name: 'n' }, null)).toEqual({ before: { id: 1, name: 'n' }, after: null });
  });
});
