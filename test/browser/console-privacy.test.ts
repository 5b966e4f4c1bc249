import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, floorplanPng, hasChromium } from '../../testkit/browser.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser } from '../../testkit/identity.js';
import { uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * Tracking windows on the console (issue 32), in Debian's Chromium against a real gateway: the operator sees whether
 * they are tracked themself, and a person whose window closed after their last position is listed as "not tracked
 * now" instead of a dot that would look like a lost device. Leaves a screenshot in test-artifacts/.
 */

const title = `console tracking windows in Chromium (${driverLabel})`;
if (!hasChromium) console.warn(`SKIPPED ${title}: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`);

const ALWAYS = {
  time_zone: 'UTC',
  weekly: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((day) => ({ day, from: '00:00', to: '24:00' })),
};
const NEVER = { time_zone: 'UTC', weekly: [] };

describe.skipIf(!hasChromium)(title, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let browser: Browser;
  let page: Page;
  let buildingId: number;
  let ground: number;
  const problems: string[] = [];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    running = await startTestGateway();
    admin = await adminClient(running.client);
    const building = await admin.post('/api/v1/buildings', {
      name: 'Privacy HQ',
      location: { lat: 40.4168, lng: -3.7038 },
      dimensions: { width: 100, length: 75 },
      rotation: 0,
    });
    expect(building.status, building.text).toBe(201);
    buildingId = building.body.id;
    const image = await uploadImage(admin, floorplanPng(800, 600, 8));
    ground = (await admin.post('/api/v1/floors', { building_id: buildingId, level: 0, name: 'Ground', map_id: image.body.id, scale: 8 }))
      .body.id;
    // Two people on shift; then one shift ends. The operator (the admin) is off duty: tracked never.
    const onShift = await createUser(admin, 'user', { full_name: 'Ana on shift' });
    const offShift = await createUser(admin, 'user', { full_name: 'Bruno off shift' });
    for (const person of [onShift, offShift]) {
      expect((await admin.put(`/api/v1/users/${person.user.id}/tracking_window`, ALWAYS)).status).toBe(200);
    }
    const pose = (deviceId: string, userId: string, x: number) => ({
      device_id: deviceId,
      user_id: userId,
      timestamp: Date.now() - 1000,
      building_id: buildingId,
      floor_id: ground,
      x,
      y: 40,
    });
    const upload = await admin.post('/api/v1/realtime/positions', {
      poses: [pose('ana-phone', onShift.user.id, 30), pose('bruno-phone', offShift.user.id, 60)],
    });
    expect(upload.status, upload.text).toBe(204);
    expect((await admin.put(`/api/v1/users/${offShift.user.id}/tracking_window`, NEVER)).status).toBe(200);
    const me = await admin.get('/api/v1/users/me/privacy');
    expect((await admin.put(`/api/v1/users/${me.body.user_id}/tracking_window`, NEVER)).status).toBe(200);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    page = await context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await running?.stop();
  });

  const signIn = async () => {
    await page.goto(`${running.baseUrl}/console`);
    await page.locator('#email').fill(ADMIN_EMAIL);
    await page.locator('#password').fill(ADMIN_PASSWORD);
    await page.keyboard.press('Enter');
    await page.locator('#connection[data-state="live"]').waitFor();
    await page.selectOption('#building', String(buildingId));
    await page.selectOption('#floor', String(ground));
    await page.locator('.floor-map image.floorplan').waitFor();
  };

  it('shows the operator "Tracking: off", and a person whose window closed as not tracked now, without their dot', async () => {
    await signIn();
    await page.locator('#tracking[data-tracked="false"]', { hasText: 'Tracking: off' }).waitFor();
    await page.locator('g.device[data-device-id="ana-phone"] .device-dot').waitFor();
    await page.locator('#map-summary', { hasText: 'Not tracked now: Bruno off shift · bruno-phone.' }).waitFor();
    expect(await page.locator('g.device[data-device-id="bruno-phone"]').count()).toBe(0);
    expect(await page.locator('#map-summary').textContent()).toContain('1 device live');
    await page.screenshot({ path: new URL('privacy-1-not-tracked-now.png', ARTIFACTS).pathname, fullPage: true });
    expect(problems).toEqual([]);
  });

  it('shows "Tracking: on" once the operator is inside a window', async () => {
    const me = await admin.get('/api/v1/users/me/privacy');
    expect((await admin.put(`/api/v1/users/${me.body.user_id}/tracking_window`, ALWAYS)).status).toBe(200);
    await page.reload(); // the session is kept: the console starts again and asks anew
    await page.locator('#connection[data-state="live"]').waitFor();
    await page.locator('#tracking[data-tracked="true"]', { hasText: 'Tracking: on' }).waitFor();
    expect(await page.locator('#tracking').getAttribute('title')).toContain('inside your tracking window');
    await page.locator('#tracking').screenshot({ path: new URL('privacy-2-tracking-on.png', ARTIFACTS).pathname });
    expect(problems).toEqual([]);
  });
});
