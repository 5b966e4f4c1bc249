/**
 * What an audit entry says changed: the before/after of the changed fields, secrets redacted. Pure, so the
 * rules are unit-tested without a database.
 */

export const REDACTED = '[redacted]';

/**
 * A field whose name says it holds a secret: passwords, password and key hashes, tokens, webhook secrets, API
 * keys. Ids of such things (`api_key_id`) are not secrets and stay readable.
 */
const SECRET_NAME = /pass(word|wd)?|secret|token|hash|api_?key|private_?key|signature|credential/i;
const ID_NAME = /(^|_)ids?$|Ids?$/;

export function isSecretField(name: string): boolean {
  return SECRET_NAME.test(name) && !ID_NAME.test(name);
}

/** A deep copy as JSON would store it, with every secret-named field's value replaced by `[redacted]`. */
export function redact(value: unknown): unknown {
  if (value === null || value === undefined) return value ?? null;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(redact);
  if (typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value as Record<string, unknown>)) {
      if (inner === undefined || typeof inner === 'function') continue;
      out[key] = isSecretField(key) && inner !== null ? REDACTED : redact(inner);
    }
    return out;
  }
  return value;
}

export interface AuditChanges {
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

/**
 * `before` and `after` are the object as the API presents it (null: it did not exist / no longer exists).
 * An update keeps only the fields that differ. `sent` is the request body: a secret field it set that the
 * presentation does not show (a password) is listed as changed, redacted, so a password change is visible
 * in the log without its value.
 */
export function auditChanges(before: unknown, after: unknown, sent?: unknown): AuditChanges {
  const b = (redact(before) ?? null) as Record<string, unknown> | null;
  const a = (redact(after) ?? null) as Record<string, unknown> | null;
  const hidden: Record<string, unknown> = {};
  if (sent && typeof sent === 'object' && !Array.isArray(sent)) {
    for (const [key, value] of Object.entries(redact(sent) as Record<string, unknown>)) {
      if (value === REDACTED && !(a && key in a) && !(b && key in b)) hidden[key] = value;
    }
  }
  if (b === null || a === null) return { before: b, after: a === null ? null : { ...a, ...hidden } };
  const changedBefore: Record<string, unknown> = {};
  const changedAfter: Record<string, unknown> = {};
  for (const key of new Set([...Object.keys(b), ...Object.keys(a)])) {
    if (JSON.stringify(b[key]) === JSON.stringify(a[key])) continue;
    changedBefore[key] = b[key] ?? null;
    changedAfter[key] = a[key] ?? null;
  }
  for (const [key, value] of Object.entries(hidden)) {
    changedBefore[key] = REDACTED;
    changedAfter[key] = value;
  }
  return { before: changedBefore, after: changedAfter };
}
