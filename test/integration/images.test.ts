import { createHash } from 'node:crypto';
import SitumSDK from '@situm/sdk-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, createApiKey, createOrganization, createUser, login } from '../../testkit/identity.js';
import { blobOf, encodeForm, gifBytes, jpegBytes, pngBytes, uploadImage, webpLosslessBytes } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** GET as raw bytes (the TestClient reads text, which would mangle binary). */
async function getBytes(running: RunningGateway, token: string, path: string, headers: Record<string, string> = {}) {
  const response = await fetch(running.baseUrl + path, { headers: { authorization: `Bearer ${token}`, ...headers } });
  return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
}

describe(`images (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  beforeAll(async () => {
    // A JSON limit below the image limit: uploads must be capped by MAX_IMAGE_BYTES, not MAX_BODY_BYTES.
    running = await startTestGateway({ MAX_IMAGE_BYTES: '4096', MAX_BODY_BYTES: '1024' });
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    admin = running.client.withToken(token);
  });
  afterAll(async () => running?.stop());

  it('uploads a PNG sent by fetch as FormData, then serves the identical bytes with cache headers', async () => {
    const png = pngBytes(5, 3);
    const form = new FormData();
    form.append('image', blobOf(png, 'image/png'), 'plan.png');
    form.append('rtf', 'true');
    const response = await fetch(`${running.baseUrl}/api/v1/images`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: form,
    });
    expect(response.status).toBe(201);
    const body = await response.json();
    expect(body).toEqual({
      id: expect.any(String),
      url: `/api/v1/images/${body.id}`,
      content_type: 'image/png',
      width: 5,
      height: 3,
      size: png.length,
    });

    const served = await getBytes(running, token, body.url);
    expect(served.status).toBe(200);
    expect(served.bytes.equals(png)).toBe(true);
    expect(served.headers.get('content-type')).toBe('image/png');
    expect(served.headers.get('cache-control')).toBe('private, max-age=31536000, immutable');
    expect(served.headers.get('etag')).toBe(`"${sha256(png)}"`);
    expect(served.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('answers 304 to a matching If-None-Match, and the bytes to a stale one', async () => {
    const png = pngBytes(2, 2);
    const { id } = (await uploadImage(admin, png)).body;
    const etag = `"${sha256(png)}"`;
    for (const ifNoneMatch of [etag, `W/${etag}`, `"stale", ${etag}`]) {
      const revalidated = await getBytes(running, token, `/api/v1/images/${id}`, { 'if-none-match': ifNoneMatch });
      expect(revalidated.status, ifNoneMatch).toBe(304);
      expect(revalidated.bytes.length).toBe(0);
      expect(revalidated.headers.get('etag')).toBe(etag);
      // RFC 9110: a 304 may announce the representation's length, never a made-up 0.
      expect(revalidated.headers.get('content-length')).toBe(String(png.length));
    }
    const stale = await getBytes(running, token, `/api/v1/images/${id}`, { 'if-none-match': `"${sha256(Buffer.from('other'))}"` });
    expect(stale.status).toBe(200);
    expect(stale.bytes.equals(png)).toBe(true);
  });

  it('stores JPEG and WebP by their bytes, whatever the declared type, name or field (image or file)', async () => {
    const jpeg = jpegBytes(17, 9);
    const disguised = await uploadImage(admin, jpeg, { type: 'image/png', filename: 'really-a-png.png' });
    expect(disguised.status).toBe(201);
    expect(disguised.body).toMatchObject({ content_type: 'image/jpeg', width: 17, height: 9, size: jpeg.length });
    const servedJpeg = await getBytes(running, token, disguised.body.url);
    expect(servedJpeg.headers.get('content-type')).toBe('image/jpeg');
    expect(servedJpeg.bytes.equals(jpeg)).toBe(true);

    const webp = webpLosslessBytes(7, 4);
    const viaFile = await uploadImage(admin, webp, { field: 'file', type: 'application/octet-stream', filename: 'x.bin' });
    expect(viaFile.status).toBe(201);
    expect(viaFile.body).toMatchObject({ content_type: 'image/webp', width: 7, height: 4 });
    expect((await getBytes(running, token, viaFile.body.url)).bytes.equals(webp)).toBe(true);
  });

  it('refuses a GIF and a text file named .png with 415 and the flat error body', async () => {
    const gif = await uploadImage(admin, gifBytes(), { type: 'image/gif', filename: 'a.gif' });
    expect(gif.status).toBe(415);
    expect(gif.body).toEqual({ status: 415, code: 'unsupported_media_type', message: expect.any(String) });
    const text = await uploadImage(admin, Buffer.from('hello, I am text\n'), { type: 'image/png', filename: 'plan.png' });
    expect(text.status).toBe(415);
    expect(text.body.code).toBe('unsupported_media_type');
    // A known signature with a broken header is not an image either, but it is a PNG gone bad: 422.
    const broken = await uploadImage(admin, pngBytes(3, 3).subarray(0, 16));
    expect(broken.status).toBe(422);
    expect(broken.body.errors[0].field).toBe('image');
  });

  it('answers 422 naming the field when there is no file part, and 400 to a malformed body', async () => {
    const form = new FormData();
    form.append('rtf', 'true');
    form.append('picture', blobOf(pngBytes(2, 2)), 'p.png');
    const { body, contentType } = await encodeForm(form);
    const missing = await admin.request('POST', '/api/v1/images', { raw: body, headers: { 'content-type': contentType } });
    expect(missing.status).toBe(422);
    expect(missing.body).toMatchObject({ status: 422, code: 'validation_failed', errors: [{ field: 'image' }] });

    const truncated = await admin.request('POST', '/api/v1/images', {
      raw: body.subarray(0, body.length - 40),
      headers: { 'content-type': contentType },
    });
    expect(truncated.status).toBe(400);
    expect(truncated.body).toMatchObject({ status: 400, code: 'bad_request' });
    const noBoundary = await admin.request('POST', '/api/v1/images', { raw: body, headers: { 'content-type': 'multipart/form-data' } });
    expect(noBoundary.status).toBe(400);
    const notMultipart = await admin.request('POST', '/api/v1/images', { raw: pngBytes(2, 2), headers: { 'content-type': 'image/png' } });
    expect(notMultipart.status).toBe(415);
  });

  it('caps uploads at MAX_IMAGE_BYTES (413), which may exceed MAX_BODY_BYTES', async () => {
    const fits = Buffer.concat([pngBytes(2, 2), Buffer.alloc(2500)]); // over the 1 KiB JSON limit, under 4 KiB
    expect((await uploadImage(admin, fits)).status).toBe(201);
    const tooLarge = await uploadImage(admin, Buffer.concat([pngBytes(2, 2), Buffer.alloc(5000)]));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body).toMatchObject({ status: 413, code: 'payload_too_large' });
  });

  it('refuses to delete an image a floor still uses (409), and deletes it once released', async () => {
    const { id } = (await uploadImage(admin, pngBytes(4, 4))).body;
    const building = await admin.post('/api/v1/buildings', {
      name: 'Plan holder',
      location: { lat: 1, lng: 1 },
      dimensions: { width: 2, length: 2 },
    });
    const floor = await admin.post('/api/v1/floors', { building_id: building.body.id, level: 0, map_id: id });
    expect(floor.body.maps).toMatchObject({ map_id: id, map_url: `/api/v1/images/${id}`, scale: 2 });
    const refused = await admin.delete(`/api/v1/images/${id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toContain(`floor ${floor.body.id}`);
    await admin.patch(`/api/v1/floors/${floor.body.id}`, { map_id: null });
    expect((await admin.delete(`/api/v1/images/${id}`)).status).toBe(204);
  });

  it('keeps images inside their organization: another one gets 404 on read and delete', async () => {
    const { id } = (await uploadImage(admin, pngBytes(3, 2))).body;
    const { client: intruder } = await createOrganization(admin);
    expect((await intruder.get(`/api/v1/images/${id}`)).status).toBe(404);
    const deleted = await intruder.delete(`/api/v1/images/${id}`);
    expect(deleted.status).toBe(404);
    expect(deleted.body.code).toBe('not_found');
    expect((await getBytes(running, token, `/api/v1/images/${id}`)).status).toBe(200);
  });

  it("a floorplan must be an image of the caller's organization (422 on map_id); the same image works at home", async () => {
    const { id } = (await uploadImage(admin, pngBytes(6, 2))).body;
    const { client: other } = await createOrganization(admin);
    const building = { name: 'Borrowed plan', location: { lat: 1, lng: 1 }, dimensions: { width: 3, length: 1 } };
    const abroad = await other.post('/api/v1/buildings', building);
    const refused = await other.post('/api/v1/floors', { building_id: abroad.body.id, level: 0, map_id: id });
    expect(refused.status).toBe(422);
    expect(refused.body.errors).toEqual([{ field: 'map_id', message: 'no such image in your organization' }]);
    const home = await admin.post('/api/v1/buildings', building);
    const floor = await admin.post('/api/v1/floors', { building_id: home.body.id, level: 0, map_id: id });
    expect(floor.status).toBe(201);
    expect(floor.body.maps).toMatchObject({ map_id: id, scale: 2 });
  });

  it('lets readers read, and only writers upload or delete', async () => {
    const { id } = (await uploadImage(admin, pngBytes(4, 4))).body;
    const readOnly = running.client.withHeaders({ 'x-api-key': await createApiKey(admin, 'read-only') });
    const refused = await uploadImage(readOnly, pngBytes(2, 2));
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('forbidden');
    expect((await readOnly.get(`/api/v1/images/${id}`)).status).toBe(200);
    expect((await readOnly.delete(`/api/v1/images/${id}`)).status).toBe(403);

    const { client: user } = await createUser(admin, 'user');
    expect((await user.get(`/api/v1/images/${id}`)).status).toBe(200);
    expect((await uploadImage(user, pngBytes(2, 2))).status).toBe(403);
    expect((await user.delete(`/api/v1/images/${id}`)).status).toBe(403);

    expect((await admin.delete(`/api/v1/images/${id}`)).status).toBe(204);
    expect((await admin.get(`/api/v1/images/${id}`)).status).toBe(404);
    expect((await admin.delete(`/api/v1/images/${id}`)).status).toBe(404);
    expect((await running.client.get(`/api/v1/images/${id}`)).status).toBe(401);
  });

  it('accepts an upload from the official client (axios multipart, rtf=true)', async () => {
    const sdk = new SitumSDK({ domain: running.baseUrl, auth: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    const webp = webpLosslessBytes(9, 2);
    const uploaded = await sdk.images.uploadImage(blobOf(webp, 'image/webp'), { filename: 'icon.webp', rtf: true });
    expect(uploaded.url).toBe(`/api/v1/images/${uploaded.id}`);
    const served = await getBytes(running, token, uploaded.url);
    expect(served.headers.get('content-type')).toBe('image/webp');
    expect(served.bytes.equals(webp)).toBe(true);
  });
});
