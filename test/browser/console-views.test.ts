import { mkdirSync, readFileSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, floorplanPng, hasChromium } from '../../testkit/browser.js';
import { squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser } from '../../testkit/identity.js';
import { uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * The console's views for what operators would rather see than read, in Debian's Chromium against a real
 * gateway: the route from the nearest responder to a selected alarm, a device's trail, the heatmap overlay and
 * the day report's charts with their CSV downloads. Each leaves a screenshot in test-artifacts/.
 */

const title = `console views in Chromium (${driverLabel})`;
if (!hasChromium) console.warn(`SKIPPED ${title}: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`);

describe.skipIf(!hasChromium)(title, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let browser: Browser;
  let page: Page;
  let buildingId: number;
  let ground: number;
  let first: number;
  let groupId: string;
  let alarmId: string;
  const PLAN = { width: 800, height: 600, scale: 8 }; // 100 m x 75 m at 8 px per metre
  const problems: string[] = [];
  let shot = 0;
  const screenshot = async (name: string) => {
    await page.screenshot({ path: new URL(`views-${++shot}-${name}.png`, ARTIFACTS).pathname, fullPage: true });
  };
  const upload = async (poses: object[]) => {
    const response = await admin.post('/api/v1/realtime/positions', { poses });
    expect(response.status, response.text).toBe(204);
  };

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    running = await startTestGateway();
    admin = await adminClient(running.client);
    const building = await admin.post('/api/v1/buildings', {
      name: 'Views HQ',
      location: { lat: 40.4168, lng: -3.7038 },
      dimensions: { width: 100, length: 75 },
      rotation: 0,
    });
    expect(building.status, building.text).toBe(201);
    buildingId = building.body.id;
    const image = await uploadImage(admin, floorplanPng(PLAN.width, PLAN.height, PLAN.scale));
    ground = (
      await admin.post('/api/v1/floors', { building_id: buildingId, level: 0, name: 'Ground', map_id: image.body.id, scale: PLAN.scale })
    ).body.id;
    first = (await admin.post('/api/v1/floors', { building_id: buildingId, level: 1, level_height: 4, name: 'First' })).body.id;
    // A corridor along y=40 with a branch south at x=50, and a lift at x=95 to the first floor.
    const paths = await admin.put(`/api/v1/buildings/${buildingId}/paths`, {
      nodes: [
        { id: 1, floor_id: ground, x: 5, y: 40 },
        { id: 2, floor_id: ground, x: 50, y: 40 },
        { id: 3, floor_id: ground, x: 95, y: 40 },
        { id: 4, floor_id: ground, x: 50, y: 10 },
        { id: 5, floor_id: first, x: 95, y: 40 },
        { id: 6, floor_id: first, x: 20, y: 40 },
      ],
      links: [
        { source: 1, target: 2, origin: 'both', accessible: true },
        { source: 2, target: 3, origin: 'both', accessible: true },
        { source: 2, target: 4, origin: 'both', accessible: true },
        { source: 3, target: 5, origin: 'both', accessible: true, tags: ['lift'] },
        { source: 5, target: 6, origin: 'both', accessible: true },
      ],
    });
    expect(paths.status, paths.text).toBe(200);
    expect(
      (
        await admin.post('/api/v1/geofences', {
          name: 'Ward A',
          building_id: buildingId,
          floor_id: ground,
          type: 'POLYGON',
          cartesians: squareCartesians(40, 30, 20),
        })
      ).status,
    ).toBe(201);
    const group = await admin.post('/api/v1/groups', { name: 'Responders' });
    groupId = group.body.id;
    const responder = await createUser(admin, 'user', { groups: groupId, full_name: 'Rosa Responder' });
    const now = Date.now();
    // The responder far along the corridor; a visitor nearer in a straight line but not a responder.
    await upload([
      { device_id: 'responder-1', user_id: responder.user.id, timestamp: now, building_id: buildingId, floor_id: ground, x: 10, y: 41 },
      { device_id: 'visitor-9', timestamp: now, building_id: buildingId, floor_id: ground, x: 80, y: 30 },
    ]);
    // A walker crossing Ward A over the last nine minutes: a trail, heat, a stay and visitors.
    await upload(
      Array.from({ length: 10 }, (_, i) => ({
        device_id: 'walker',
        timestamp: now - (9 - i) * 60_000,
        building_id: buildingId,
        floor_id: ground,
        x: 10 + i * 9,
        y: 40,
      })),
    );
    // Someone sitting in Ward A for two minutes, a fix every 5 s: a stay the day report shows.
    await upload(
      Array.from({ length: 25 }, (_, i) => ({
        device_id: 'sitter',
        timestamp: now - 300_000 + i * 5_000,
        building_id: buildingId,
        floor_id: ground,
        x: 45,
        y: 35,
      })),
    );
    const alarm = await admin.post('/api/v1/alarms', {
      type: 'DANGER',
      device_id: 'patient-3',
      building_id: buildingId,
      floor_id: ground,
      x: 90,
      y: 40,
    });
    expect(alarm.status, alarm.text).toBe(201);
    alarmId = alarm.body.id;

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
    const context = await browser.newContext({ viewport: { width: 1600, height: 1400 }, acceptDownloads: true });
    page = await context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    await page.goto(`${running.baseUrl}/console`);
    await page.locator('#email').fill(ADMIN_EMAIL);
    await page.locator('#password').fill(ADMIN_PASSWORD);
    await page.keyboard.press('Enter');
    await page.locator('#connection[data-state="live"]').waitFor();
    await page.selectOption('#building', String(buildingId));
    await page.selectOption('#floor', String(ground));
    await page.locator('.floor-map image.floorplan').waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await running?.stop();
  });

  it('draws the route from the nearest responder of the chosen group to a selected alarm, with its distance', async () => {
    await page.selectOption('#responders', groupId);
    await page.locator(`li.alarm[data-alarm-id="${alarmId}"] .alarm-select`).click();
    await page.locator('#route-summary', { hasText: /^Nearest responder: / }).waitFor();
    const summary = (await page.locator('#route-summary').textContent())!;
    // From (10, 41) snapped to the corridor, to the alarm at (90, 40): 80 m along it.
    expect(summary).toContain('responder-1');
    expect(summary).toContain('80 m');
    const points = (await page.locator('.floor-map g.route polyline').getAttribute('points'))!.split(' ');
    expect(points[0]).toBe(`${10 * PLAN.scale},${PLAN.height - 40 * PLAN.scale}`);
    expect(points.at(-1)).toBe(`${90 * PLAN.scale},${PLAN.height - 40 * PLAN.scale}`);
    await screenshot('route-to-alarm');

    // Any device: the walker, last seen 1 m from the alarm, is nearest (the alarm's own device never counts).
    await page.selectOption('#responders', '');
    await page.locator('#route-summary', { hasText: /^Nearest responder: walker: 1 m/ }).waitFor();
  });

  it("draws a device's trail when its dot is clicked", async () => {
    await page.locator('g.device[data-device-id="walker"] .device-dot').click();
    await page.locator('#trail-summary', { hasText: /^Trail of walker: 10 positions/ }).waitFor();
    const trail = page.locator('.floor-map g.trail[data-device-id="walker"]');
    expect(await trail.getAttribute('data-points')).toBe('10');
    const points = (await trail.locator('polyline').getAttribute('points'))!.split(' ');
    expect(points[0]).toBe(`${10 * PLAN.scale},${PLAN.height - 40 * PLAN.scale}`);
    expect(points.at(-1)).toBe(`${91 * PLAN.scale},${PLAN.height - 40 * PLAN.scale}`);
    // A shorter window keeps only the last positions: one a minute, the newest now.
    await page.selectOption('#trail-minutes', '5');
    await page.locator('.floor-map g.trail[data-device-id="walker"][data-points="5"]').waitFor({ state: 'attached' });
    await screenshot('trail');
  });

  it('overlays the heatmap of the floor over the chosen range', async () => {
    await page.selectOption('#heatmap', '1');
    await page.locator('.floor-map .heat-cell').nth(5).waitFor(); // more than 5 cells
    // Every heat cell lies on the corridor the devices walked (y 30 to 42 m), drawn in 2 m squares.
    const cells = await page
      .locator('.floor-map .heat-cell')
      .evaluateAll((rects) => rects.map((rect) => ({ y: Number(rect.getAttribute('y')), height: Number(rect.getAttribute('height')) })));
    for (const cell of cells) {
      expect(cell.height).toBeCloseTo(2 * PLAN.scale, 3);
      const metres = (PLAN.height - cell.y - cell.height / 2) / PLAN.scale;
      expect(metres).toBeGreaterThan(28);
      expect(metres).toBeLessThan(44);
    }
    await screenshot('heatmap');
    await page.selectOption('#heatmap', '');
    await page.locator('.floor-map .heat-cell').first().waitFor({ state: 'detached' });
    expect(await page.locator('.floor-map .heat-cell').count()).toBe(0);
  });

  it("shows the day's visitors per hour and stay time per geofence as charts, with CSV downloads", async () => {
    await page.locator('#report-show').click();
    await page.locator('#report-status', { hasText: /^Views HQ, / }).waitFor();
    expect(await page.locator('#visitors-chart rect.chart-bar').count()).toBe(24);
    const visits = await page
      .locator('#visitors-chart rect.chart-bar')
      .evaluateAll((rects) => rects.reduce((sum, rect) => sum + Number(rect.getAttribute('data-value')), 0));
    expect(visits).toBeGreaterThanOrEqual(3);
    await page
      .locator('#stay-chart .chart-label', { hasText: /^Ward A$/ })
      .first()
      .waitFor();
    // The sitter's 2 minutes (24 gaps of 5 s), plus the walker's passes.
    expect(Number(await page.locator('#stay-chart rect.chart-bar').first().getAttribute('data-value'))).toBeGreaterThanOrEqual(120);
    await page.locator('#report-pane, .report-pane').scrollIntoViewIfNeeded();
    await screenshot('day-report');

    const download = page.waitForEvent('download');
    await page.locator('#visitors-chart button.csv-download').click();
    const file = await download;
    expect(file.suggestedFilename()).toMatch(/^visitors-\d{4}-\d{2}-\d{2}\.csv$/);
    const csv = readFileSync((await file.path())!, 'utf8');
    expect(csv.split('\n')[0]).toContain('visitors');
    expect(problems).toEqual([]);
  });
});
