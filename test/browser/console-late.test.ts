import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../gateway/auth/principal.js';
import { ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, floorplanPng, hasChromium } from '../../testkit/browser.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient } from '../../testkit/identity.js';
import { uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * Event time in the console (issue 30), in Debian's Chromium: an alarm found from fixes that arrived late says by
 * how much and when it happened; a silence DEADMAN whose device's buffer came in says what it shows ("Reported
 * late: was moving"), and gets it live when the evidence arrives; a device's trail draws the stretch it uploaded late
 * from its buffer dashed, with its delay.
 */
const title = `console marks late alarms in Chromium (${driverLabel})`;
if (!hasChromium) console.warn(`SKIPPED ${title}: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`);

describe.skipIf(!hasChromium)(title, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    running = await startTestGateway();
    admin = await adminClient(running.client);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
    page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  });
  afterAll(async () => {
    await browser?.close();
    await running?.stop();
  });

  it('says a max stay was late and when it happened, and what a silent device reported late', async () => {
    const organizationId = (await admin.get('/api/v1/organizations/current_organization')).body.id;
    const building = (
      await admin.post('/api/v1/buildings', {
        name: 'Clinic',
        location: { lat: 40.4168, lng: -3.7038 },
        dimensions: { width: 60, length: 40 },
        rotation: 0,
      })
    ).body;
    const floor = (await admin.post('/api/v1/floors', { building_id: building.id, level: 0, name: 'Ground floor' })).body;
    const place = { organizationId, buildingId: building.id, floorId: floor.id, x: 20, y: 20, by: 'system' as const };
    const occurredAt = new Date(Date.now() - 12 * 60_000).toISOString();
    const { alarms } = running.gateway.services;
    const stay = await alarms.raise({
      ...place,
      type: 'GEOFENCE_MAX_STAY_TIME',
      deviceId: 'buffered-7',
      details: { geofence_name: 'Server room', max_stay_time: 60, occurred_at: occurredAt, late: true, delay_ms: 12 * 60_000 },
    });
    const silent = await alarms.raise({ ...place, type: 'DEADMAN', deviceId: 'quiet-3', details: { reason: 'silence' } });

    await page.goto(`${running.baseUrl}/console`);
    await page.locator('#email').fill(ADMIN_EMAIL);
    await page.locator('#password').fill(ADMIN_PASSWORD);
    await page.keyboard.press('Enter');
    await page.locator('#connection[data-state="live"]').waitFor();
    const card = (id: string) => page.locator(`li.alarm[data-alarm-id="${id}"] .alarm-late`);
    await card(stay.event.id).waitFor();
    expect(await card(stay.event.id).textContent()).toMatch(/^Late by 12 min: happened \d\d:\d\d:\d\d \(12 min ago\)$/);
    expect(await card(silent.event.id).isVisible()).toBe(false);

    // The silent device's buffer arrives: the evidence reaches the open card live.
    const evidence = {
      count: 3,
      first_at: new Date(Date.now() - 5 * 60_000).toISOString(),
      last_at: new Date(Date.now() - 3 * 60_000).toISOString(),
      was_moving: true,
      moved_m: 20,
      fixes: [],
    };
    await alarms.amendDetails(organizationId, silent.event.id, { silence_evidence: evidence });
    await card(silent.event.id).waitFor();
    expect(await card(silent.event.id).textContent()).toBe('Reported late: was moving (3 fixes, 20 m)');
    await page.screenshot({ path: new URL('late-1-alarms.png', ARTIFACTS).pathname });
    expect(problems).toEqual([]);
  });

  it('draws the stretch of a trail that reached us late dashed, with its delay, and counts it', async () => {
    const PLAN = { width: 600, height: 400, scale: 10 }; // 60 m x 40 m at 10 px per metre
    const building = (
      await admin.post('/api/v1/buildings', {
        name: 'Warehouse',
        location: { lat: 40.42, lng: -3.7 },
        dimensions: { width: 60, length: 40 },
        rotation: 0,
      })
    ).body;
    const image = await uploadImage(admin, floorplanPng(PLAN.width, PLAN.height, PLAN.scale));
    const floor = (
      await admin.post('/api/v1/floors', { building_id: building.id, level: 0, name: 'Ground', map_id: image.body.id, scale: PLAN.scale })
    ).body;
    const users = (await admin.get('/api/v1/users?size=1000')).body.data as { id: string; email: string }[];
    const principal: Principal = {
      userId: users.find((user) => user.email === ADMIN_EMAIL)!.id,
      email: ADMIN_EMAIL,
      organizationId: (await admin.get('/api/v1/organizations/current_organization')).body.id,
      role: 'admin',
      platformAdmin: true,
      permission: 'read-write',
      via: 'jwt',
    };
    const device = 'picker-12';
    const now = Date.now();
    const at = (minutes: number) => now + minutes * 60_000;
    const pose = (timestamp: number, x: number, y: number) => ({
      device_id: device,
      timestamp,
      building_id: building.id,
      floor_id: floor.id,
      x,
      y,
    });
    // Uploads through the gateway's pipeline (the one behind the HTTP and WebSocket uploads) as if they reached us at `receivedAt`.
    const arrive = (poses: object[], receivedAt: number) => running.gateway.services.pipeline.process(principal, poses, receivedAt);
    // Twelve minutes of a walk, a fix every 30 s: along the aisle on time, then down the cold store's stairs with no
    // network for four minutes (buffered), then on time again along the bottom wall once back on the network.
    for (let i = 0; i < 8; i++) await arrive([pose(at(-12 + i * 0.5), 5 + i * 3, 32)], at(-12 + i * 0.5) + 300);
    const buffered = Array.from({ length: 8 }, (_, i) => pose(at(-8 + i * 0.5), 28 + i, 32 - i * 3));
    await arrive([pose(at(-4), 36, 8)], at(-4) + 300);
    await arrive(buffered, at(-4) + 1000);
    for (let i = 1; i <= 7; i++) await arrive([pose(at(-4 + i * 0.5), 36 + i * 2.5, 8)], at(-4 + i * 0.5) + 300);
    const live = await admin.post('/api/v1/realtime/positions', { poses: [pose(Date.now(), 55, 8)] });
    expect(live.status, live.text).toBe(204);

    // The console lists buildings when it opens: open it again to see the new one.
    await page.reload();
    if (await page.locator('#email').isVisible()) {
      await page.locator('#email').fill(ADMIN_EMAIL);
      await page.locator('#password').fill(ADMIN_PASSWORD);
      await page.keyboard.press('Enter');
    }
    await page.locator('#connection[data-state="live"]').waitFor();
    await page.selectOption('#building', String(building.id));
    await page.selectOption('#floor', String(floor.id));
    await page.locator('.floor-map image.floorplan').waitFor();
    await page.locator(`g.device[data-device-id="${device}"] .device-dot`).click();
    const summary = page.locator('#trail-summary', { hasText: new RegExp(`^Trail of ${device}: `) });
    await summary.waitFor();
    expect(await summary.textContent()).toBe(
      `Trail of ${device}: 25 positions in the last 15 min. 8 reached us late (dashed, by up to 4 min).`,
    );
    const trail = page.locator(`.floor-map g.trail[data-device-id="${device}"]`);
    expect(await trail.getAttribute('data-points')).toBe('25');
    expect(await trail.getAttribute('data-late')).toBe('8');
    const px = (x: number, y: number) => `${x * PLAN.scale},${PLAN.height - y * PLAN.scale}`;
    // Solid to the last fix before the network went, dashed through the buffer to the first fix after it, solid on.
    const solid = await trail
      .locator('polyline.trail-on-time')
      .evaluateAll((lines) =>
        lines.map((line) => ({ points: line.getAttribute('points')!.split(' '), dashed: line.getAttribute('stroke-dasharray') })),
      );
    expect(solid.map((line) => [line.points[0], line.points.at(-1), line.points.length, line.dashed])).toEqual([
      [px(5, 32), px(26, 32), 8, null],
      [px(36, 8), px(55, 8), 9, null],
    ]);
    const lateRun = trail.locator('g.trail-late-run');
    expect(await lateRun.count()).toBe(1);
    expect(await lateRun.getAttribute('data-late-fixes')).toBe('8');
    const dashed = lateRun.locator('polyline.trail-late');
    const dashedPoints = (await dashed.getAttribute('points'))!.split(' ');
    expect([dashedPoints[0], dashedPoints.at(-1), dashedPoints.length]).toEqual([px(26, 32), px(36, 8), 10]);
    expect(await dashed.getAttribute('stroke-dasharray')).toMatch(/^[\d.]+ [\d.]+$/);
    const label = lateRun.locator('text.trail-late-label');
    expect(await label.textContent()).toBe('late by up to 4 min');
    expect(await label.isVisible()).toBe(true);
    expect(await lateRun.locator('title').textContent()).toMatch(
      /^Reached us late by up to 4 min: 8 fixes taken \d\d:\d\d:\d\d to \d\d:\d\d:\d\d, uploaded from the device's buffer$/,
    );
    expect(await trail.locator(':scope > title').textContent()).toBe(`Trail of ${device}: 25 positions, 8 reached us late (dashed)`);
    // The map and the trail's summary under it.
    const map = (await page.locator('#map').boundingBox())!;
    const said = (await page.locator('#trail-summary').boundingBox())!;
    const bottom = Math.max(map.y + map.height, said.y + said.height);
    await page.screenshot({
      path: new URL('late-2-trail.png', ARTIFACTS).pathname,
      fullPage: true,
      clip: {
        x: Math.min(map.x, said.x) - 8,
        y: map.y - 8,
        width: Math.max(map.x + map.width, said.x + said.width) - Math.min(map.x, said.x) + 16,
        height: bottom - map.y + 16,
      },
    });
    expect(problems).toEqual([]);
  });
});
