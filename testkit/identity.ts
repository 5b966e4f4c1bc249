import { expect } from 'vitest';
import { basicAuth, type TestClient } from './http-client.js';

export const ADMIN_EMAIL = 'admin@example.test';
export const ADMIN_PASSWORD = 'admin-password-1';

export async function login(client: TestClient, email: string, password: string): Promise<{ access_token: string; refresh_token: string }> {
  const response = await client.post('/api/v1/auth/access_tokens', undefined, { authorization: basicAuth(email, password) });
  expect(response.status, response.text).toBe(200);
  return response.body;
}

/** A client signed in as the first (platform) administrator. */
export async function adminClient(client: TestClient): Promise<TestClient> {
  return client.withToken((await login(client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token);
}

let counter = 0;
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`;

/** Creates a user of the admin's organization and returns it with a signed-in client. */
export async function createUser(admin: TestClient, role: 'admin' | 'user_manager' | 'user', extra: Record<string, unknown> = {}) {
  const email = `${role}-${unique()}@example.test`;
  const password = `password-of-${role}`;
  const response = await admin.post('/api/v1/users', { email, password, role, full_name: `A ${role}`, ...extra });
  expect(response.status, response.text).toBe(201);
  const tokens = await login(admin.withHeaders({ authorization: '' }), email, password);
  return { user: response.body, email, password, client: admin.withHeaders({ authorization: `Bearer ${tokens.access_token}` }) };
}

/** A second organization, made by the platform administrator, with a signed-in client for its admin. */
export async function createOrganization(platformAdmin: TestClient, name = `Org ${unique()}`) {
  const email = `admin-${unique()}@other.test`;
  const response = await platformAdmin.post('/api/v1/organizations', {
    name,
    admin: { email, password: 'other-admin-password', full_name: 'Other admin' },
  });
  expect(response.status, response.text).toBe(201);
  const tokens = await login(platformAdmin.withHeaders({ authorization: '' }), email, 'other-admin-password');
  return { organization: response.body, client: platformAdmin.withHeaders({ authorization: `Bearer ${tokens.access_token}` }) };
}

export async function createApiKey(client: TestClient, permission: 'read-only' | 'read-write' | 'positioning'): Promise<string> {
  const response = await client.post('/api/v1/auth/apikeys', { permission, description: `${permission} key` });
  expect(response.status, response.text).toBe(201);
  return response.body.apikey;
}
