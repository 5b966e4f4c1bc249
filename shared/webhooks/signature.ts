import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the secret is `whsec_` + base64 of random
 * bytes, and a signature is `v1,` + base64 HMAC-SHA256, keyed with those decoded bytes, of `{id}.{timestamp}.{body}`.
 */
export const SECRET_PREFIX = 'whsec_';

export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

export function secretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

export function sign(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', secretKey(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}
