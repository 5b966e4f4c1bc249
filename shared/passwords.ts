import { randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/** scrypt parameters: 2^15 x 8 x 128 B = 32 MiB per hash, memory-hard and ~50 ms on this class of machine. */
const N = 2 ** 15;
const r = 8;
const p = 1;
const KEY_LENGTH = 32;

function scrypt(secret: string, salt: Buffer, keyLength: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scryptCallback(secret, salt, keyLength, options, (error, key) => (error ? reject(error) : resolve(key))),
  );
}

/** `scrypt$N$r$p$salt$hash`, base64url; the parameters travel with the hash so they can be raised later. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, KEY_LENGTH, { N, r, p, maxmem: 128 * N * r * p * 2 });
  return ['scrypt', N, r, p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Constant-time comparison; a malformed stored hash simply does not verify. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, rr, pp, saltText, keyText] = stored.split('$');
  if (scheme !== 'scrypt' || !saltText || !keyText) return false;
  const cost = { N: Number(n), r: Number(rr), p: Number(pp) };
  const expected = Buffer.from(keyText, 'base64url');
  const actual = await scrypt(password, Buffer.from(saltText, 'base64url'), expected.length, {
    ...cost,
    maxmem: 128 * cost.N * cost.r * cost.p * 2,
  });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** A readable random password for the generated first admin. */
export const generatePassword = (): string => randomBytes(18).toString('base64url');
