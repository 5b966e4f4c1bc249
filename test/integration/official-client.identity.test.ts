import SitumSDK from '@situm/sdk-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createApiKey } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/** The official JavaScript client, unmodified, against a running gateway: its identity calls. */
describe(`official client @situm/sdk-js: identity (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
  });
  afterAll(async () => running?.stop());

  it('signs in with e-mail and password and reads the session claims', async () => {
    const sdk = new SitumSDK({ domain: running.baseUrl, auth: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    const organization = await sdk.cartography.getCurrentOrganization();
    expect(organization.name).toBe('Default organization');
    const session = await sdk.authSession;
    expect(session.payload).toMatchObject({
      email: ADMIN_EMAIL,
      organization_uuid: organization.id,
      role: 'admin',
      api_permission: 'read-write',
    });
  });

  it('signs in with an API key alone', async () => {
    const key = await createApiKey(admin, 'read-only');
    const sdk = new SitumSDK({ domain: running.baseUrl, auth: { apiKey: key } as never });
    const organization = await sdk.cartography.getCurrentOrganization();
    expect(typeof organization.id).toBe('string');
    expect((await sdk.authSession).payload.api_permission).toBe('read-only');
  });

  it('reports bad credentials as a SitumError with code invalid_credentials', async () => {
    const sdk = new SitumSDK({ domain: running.baseUrl, auth: { username: ADMIN_EMAIL, password: 'wrong-password' } });
    const error = (await sdk.cartography.getCurrentOrganization().catch((e: unknown) => e)) as { status: number; code: string };
    expect(error.status).toBe(401);
    expect(error.code).toBe('invalid_credentials');
  });

  it('creates, lists (with filters), updates and deletes users, and lists positioning keys', async () => {
    const sdk = new SitumSDK({ domain: running.baseUrl, auth: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    const created = await sdk.user.createUser({
      email: 'sdk-user@example.test',
      password: 'password-1',
      fullName: 'Sdk User',
      role: 'USER',
      buildingIds: [5],
    } as never);
    expect(created).toMatchObject({ email: 'sdk-user@example.test', fullName: 'Sdk User', role: 'user', buildingIds: [5] });
    const page = await sdk.user.getUsers({ buildingIds: [5], page: 0, size: 10 } as never);
    expect(page.data.map((user) => user.id)).toEqual([created.id]);
    expect(page.metadata).toMatchObject({ totalElements: 1, number: 0 });
    const patched = await sdk.user.patchUser(created.id, { fullName: 'Renamed' } as never);
    expect(patched.fullName).toBe('Renamed');
    expect((await sdk.user.getUserById(created.id)).fullName).toBe('Renamed');
    await sdk.user.deleteUser(created.id);
    await expect(sdk.user.getUserById(created.id)).rejects.toMatchObject({ status: 404 });

    await createApiKey(admin, 'positioning');
    const keys = await sdk.user.getPositioningApikeys();
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((key) => key.permission === 'positioning')).toBe(true);
  });
});
