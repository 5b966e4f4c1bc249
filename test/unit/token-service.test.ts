import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { TokenService, type AccessClaims } from '../../gateway/auth/token-service.js';
import { type AppError, ErrorCode } from '../../shared/errors.js';
import { hashPassword, verifyPassword } from '../../shared/passwords.js';

const secret = new TextEncoder().encode('a-test-secret-that-is-long-enough-1234567890');
const claims: AccessClaims = { sub: 'user-1', email: 'a@b.c', organization_uuid: 'org-1', role: 'admin', api_permission: 'read-write' };
const day = 24 * 3600;

describe('access tokens', () => {
  it('carry the claims the official client decodes and live 4 days', async () => {
    const t0 = Date.UTC(2026, 0, 1);
    const service = new TokenService(secret, 4 * day, () => t0);
    const token = await service.sign(claims);
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    expect(payload).toMatchObject({ ...claims, iat: t0 / 1000, exp: t0 / 1000 + 4 * day });
    await expect(service.verify(token)).resolves.toMatchObject(claims);
  });

  it('name the credential they came from: the credential version and, when minted from one, the API key', async () => {
    const service = new TokenService(secret, 4 * day);
    const token = await service.sign({ ...claims, cv: 3, key_id: '6f1c0c1e-0000-4000-8000-000000000001' });
    await expect(service.verify(token)).resolves.toMatchObject({ cv: 3, key_id: '6f1c0c1e-0000-4000-8000-000000000001' });
    await expect(service.verifyIgnoringExpiry(token)).resolves.toMatchObject({ cv: 3, key_id: '6f1c0c1e-0000-4000-8000-000000000001' });
  });

  it('are refused as expired one second after exp, with code token_expired', async () => {
    let now = Date.UTC(2026, 0, 1);
    const service = new TokenService(secret, 4 * day, () => now);
    const token = await service.sign(claims);
    now += 4 * day * 1000 - 1000;
    await expect(service.verify(token)).resolves.toBeDefined();
    now += 2000;
    const error = (await service.verify(token).catch((e: unknown) => e)) as AppError;
    expect(error.code).toBe(ErrorCode.TokenExpired);
    expect(error.status).toBe(401);
  });

  it('expire at the same instant whether their signature was checked before or not', async () => {
    let now = Date.UTC(2026, 0, 1);
    const warm = new TokenService(secret, 60, () => now);
    const cold = new TokenService(secret, 60, () => now);
    const token = await warm.sign(claims);
    await warm.verify(token); // remembered from here on
    for (const offset of [59_000, 59_999, 60_000, 61_000]) {
      now = Date.UTC(2026, 0, 1) + offset;
      const fresh = new TokenService(secret, 60, () => now);
      const verdict = async (service: TokenService) =>
        service.verify(token).then(
          () => 'ok',
          (e: AppError) => e.code,
        );
      expect([offset, await verdict(warm)]).toEqual([offset, await verdict(fresh)]);
    }
    expect(await cold.verify(token).catch((e: AppError) => e.code)).toBe(ErrorCode.TokenExpired);
  });

  it('refuse a token signed with another key, or with alg none', async () => {
    const service = new TokenService(secret, day);
    const other = new TokenService(new TextEncoder().encode('another-secret-that-is-long-enough-0987654321'), day);
    await expect(service.verify(await other.sign(claims))).rejects.toMatchObject({ status: 401 });
    const header = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    const body = Buffer.from(JSON.stringify({ ...claims, iss: 'floorcast', exp: Math.floor(Date.now() / 1000) + 100 })).toString(
      'base64url',
    );
    await expect(service.verify(`${header}.${body}.`)).rejects.toMatchObject({ status: 401 });
    await expect(service.verify('not-a-jwt')).rejects.toMatchObject({ status: 401 });
  });

  it('refuse a token without the organization claim', async () => {
    const service = new TokenService(secret, day);
    const token = await new SignJWT({ sub: 'x' })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('floorcast')
      .setExpirationTime('1h')
      .sign(secret);
    await expect(service.verify(token)).rejects.toMatchObject({ status: 401 });
  });

  it('verifyIgnoringExpiry still checks the signature', async () => {
    let now = Date.UTC(2026, 0, 1);
    const service = new TokenService(secret, 60, () => now);
    const token = await service.sign(claims);
    now += 3600 * 1000;
    await expect(service.verifyIgnoringExpiry(token)).resolves.toMatchObject({ sub: 'user-1' });
    await expect(service.verifyIgnoringExpiry(`${token.slice(0, -3)}abc`)).rejects.toMatchObject({ status: 401 });
  });
});

describe('passwords', () => {
  it('hash with scrypt and a salt, and verify only the right password', async () => {
    const first = await hashPassword('correct horse');
    const second = await hashPassword('correct horse');
    expect(first).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(first).not.toBe(second);
    expect(await verifyPassword('correct horse', first)).toBe(true);
    expect(await verifyPassword('correct horsf', first)).toBe(false);
    expect(await verifyPassword('anything', 'garbage')).toBe(false);
  });
});
