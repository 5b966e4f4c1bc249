import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_POI_CATEGORIES, poiIconPng } from '../../demo/poi-icons.js';
import { ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, floorplanPng, hasChromium } from '../../testkit/browser.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser } from '../../testkit/identity.js';
import { uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * The floor map as an operator must be able to trust it, in Debian's Chromium against a real gateway: it dims
 * and says "Connection lost" (and how old its data is) as soon as the socket drops, and undims when live again;
 * labels of devices crowded in a corridor never overlap; the page fits a 390 px phone with Sign out in view.
 * Each leaves a screenshot in test-artifacts/.
 */

/** The promise: the map says the link is lost within 2 s of the socket dropping. */
const LINK_LOST_WITHIN_MS = 2_000;

const title = `console map in Chromium (${driverLabel})`;
if (!hasChromium) console.warn(`SKIPPED ${title}: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`);

describe.skipIf(!hasChromium)(title, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let buildingId: number;
  let ground: number;
  let groupId: string;
  let alarmId: string;
  const PLAN = { width: 800, height: 600, scale: 8 }; // 100 m x 75 m at 8 px per metre
  let shot = 0;
  const screenshot = async (target: Page, name: string) => {
    await target.screenshot({ path: new URL(`map-${++shot}-${name}.png`, ARTIFACTS).pathname, fullPage: true });
  };
  const upload = async (poses: object[]) => {
    const response = await admin.post('/api/v1/realtime/positions', { poses });
    expect(response.status, response.text).toBe(204);
  };
  /** Ten devices within a few metres of one another along a corridor, as in the demo's pile-up. */
  const crowd = (now = Date.now()) =>
    Array.from({ length: 10 }, (_, i) => ({
      device_id: `crowded-${String(i + 1).padStart(2, '0')}`,
      timestamp: now,
      building_id: buildingId,
      floor_id: ground,
      x: 40 + (i % 5) * 1.5,
      y: 40 + Math.floor(i / 5) * 0.8,
    }));
  const signIn = async (target: Page) => {
    await target.goto(`${running.baseUrl}/console`);
    await target.locator('#email').fill(ADMIN_EMAIL);
    await target.locator('#password').fill(ADMIN_PASSWORD);
    await target.keyboard.press('Enter');
    await target.locator('#connection[data-state="live"]').waitFor();
    await target.locator('#map[aria-busy="false"]').waitFor();
  };

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    running = await startTestGateway();
    admin = await adminClient(running.client);
    const building = await admin.post('/api/v1/buildings', {
      name: 'Map HQ',
      location: { lat: 40.4168, lng: -3.7038 },
      dimensions: { width: 100, length: 75 },
      rotation: 0,
    });
    expect(building.status, building.text).toBe(201);
    buildingId = building.body.id;
    const image = await uploadImage(admin, floorplanPng(PLAN.width, PLAN.height, PLAN.scale));
    const floor = await admin.post('/api/v1/floors', {
      building_id: buildingId,
      level: 0,
      name: 'Ground',
      map_id: image.body.id,
      scale: PLAN.scale,
    });
    expect(floor.status, floor.text).toBe(201);
    ground = floor.body.id;
    await upload(crowd());
    // A corridor along y=20; the organization's responders, one far along it; a visitor near the alarm.
    const paths = await admin.put(`/api/v1/buildings/${buildingId}/paths`, {
      nodes: [
        { id: 1, floor_id: ground, x: 5, y: 20 },
        { id: 2, floor_id: ground, x: 95, y: 20 },
      ],
      links: [{ source: 1, target: 2, origin: 'both', accessible: true }],
    });
    expect(paths.status, paths.text).toBe(200);
    expect((await admin.post('/api/v1/groups', { name: 'Cleaners' })).status).toBe(201);
    const group = await admin.post('/api/v1/groups', { name: 'Responders' });
    expect(group.status, group.text).toBe(201);
    groupId = group.body.id;
    const responder = await createUser(admin, 'user', { groups: groupId, full_name: 'Rosa Responder' });
    await upload([
      {
        device_id: 'responder-1',
        user_id: responder.user.id,
        timestamp: Date.now(),
        building_id: buildingId,
        floor_id: ground,
        x: 10,
        y: 20,
      },
      { device_id: 'visitor-9', timestamp: Date.now(), building_id: buildingId, floor_id: ground, x: 85, y: 20 },
    ]);
    // A defibrillator with its category's icon, and a POI of no category.
    const aed = DEMO_POI_CATEGORIES.find((category) => category.code === 'aed')!;
    const icon = await uploadImage(admin, poiIconPng(aed));
    expect(icon.status, icon.text).toBe(201);
    const category = await admin.post('/api/v1/poi_categories', { code: 'aed', name_en: 'Defibrillator', icon: icon.body.id });
    expect(category.status, category.text).toBe(201);
    const pois = await admin.post('/api/v1/pois_bulk', [
      {
        building_id: buildingId,
        name: 'AED by the lifts',
        info: '',
        category_id: category.body.id,
        position: { floor_id: ground, cartesians: { x: 70, y: 60 } },
      },
      { building_id: buildingId, name: 'Cafeteria', info: '', position: { floor_id: ground, cartesians: { x: 20, y: 60 } } },
    ]);
    expect(pois.status, pois.text).toBeLessThan(300);
    const alarm = await admin.post('/api/v1/alarms', {
      type: 'DANGER',
      device_id: 'patient-1',
      building_id: buildingId,
      floor_id: ground,
      x: 90,
      y: 20,
    });
    expect(alarm.status, alarm.text).toBe(201);
    alarmId = alarm.body.id;

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
    context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
    page = await context.newPage();
    await signIn(page);
    await page.locator('.floor-map image.floorplan').waitFor();
  });

  afterAll(async () => {
    await context?.setOffline(false).catch(() => undefined);
    await browser?.close();
    await running?.stop();
  });

  it('shows no two device labels overlapping when devices crowd together, and keeps every device drawn', async () => {
    await upload(crowd());
    await expect.poll(() => page.locator('g.device[data-device-id^="crowded-"]').count()).toBe(10);
    const labels = await page.locator('g.device[data-device-id^="crowded-"] .device-label').evaluateAll((texts) =>
      texts.map((text) => {
        const box = text.getBoundingClientRect();
        return {
          shown: getComputedStyle(text).display !== 'none' && getComputedStyle(text).visibility !== 'hidden',
          x: box.x,
          y: box.y,
          width: box.width,
          height: box.height,
          text: text.textContent,
        };
      }),
    );
    const shown = labels.filter((label) => label.shown);
    // Some labels are shown, and crowded ones had to give way.
    expect(shown.length).toBeGreaterThan(0);
    expect(shown.length).toBeLessThan(labels.length);
    for (let i = 0; i < shown.length; i++) {
      for (let j = i + 1; j < shown.length; j++) {
        const a = shown[i]!;
        const b = shown[j]!;
        const overlap = a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
        expect(overlap, `${a.text} overlaps ${b.text}`).toBe(false);
      }
    }
    // A device whose label gave way still says who it is on hover.
    const hiddenTitle = await page.locator('g.device.label-hidden[data-device-id^="crowded-"] title').first().textContent();
    expect(hiddenTitle).toMatch(/^crowded-\d\d at x /);
    await screenshot(page, 'labels');
  });

  it('draws points of interest with their category icons, and a plain marker for one of no category', async () => {
    const aed = page.locator('g.poi[data-category="aed"]');
    await aed.and(page.locator('.has-icon')).waitFor();
    expect(await aed.locator('title').textContent()).toBe('AED by the lifts (Defibrillator)');
    expect(await aed.locator('image.poi-icon').getAttribute('href')).toMatch(/^blob:/);
    // The icon is drawn where the POI stands: (70, 60) m at 8 px/m, y flipped.
    const x = Number(await aed.locator('image.poi-icon').getAttribute('x'));
    const width = Number(await aed.locator('image.poi-icon').getAttribute('width'));
    const y = Number(await aed.locator('image.poi-icon').getAttribute('y'));
    expect(x + width / 2).toBeCloseTo(70 * PLAN.scale, 3);
    expect(y + width / 2).toBeCloseTo(PLAN.height - 60 * PLAN.scale, 3);
    // The icon really decoded: its pixels are drawn (a rendered, non-empty box).
    expect((await aed.locator('image.poi-icon').boundingBox())!.width).toBeGreaterThan(5);
    expect(await aed.locator('.zone-label').isVisible()).toBe(true);
    const cafeteria = page.locator('g.poi', { has: page.locator('title', { hasText: /^Cafeteria$/ }) });
    expect(await cafeteria.locator('.poi-marker').isVisible()).toBe(true);
    expect(await cafeteria.locator('.zone-label').textContent()).toBe('Cafeteria');
    await screenshot(page, 'pois');
  });

  it("routes from the organization's responders by default, with the time from walking speed in seconds and minutes", async () => {
    expect(await page.locator('#responders').inputValue()).toBe(groupId);
    await page.locator(`li.alarm[data-alarm-id="${alarmId}"] .alarm-select`).click();
    await page.locator('#route-summary', { hasText: /^Nearest responder: / }).waitFor();
    // Not the visitor 5 m away: the responder 80 m along the corridor, at 1.2 m/s 67 s.
    expect(await page.locator('#route-summary').textContent()).toBe('Nearest responder: Rosa Responder · responder-1: 80 m, 1 min 7 s.');
    // Any device: the visitor, 5 m and 4 s away.
    await page.selectOption('#responders', '');
    await page.locator('#route-summary', { hasText: /^Nearest responder: visitor-9: 5 m, 4 s\.$/ }).waitFor();
    await screenshot(page, 'route-time');
  });

  it('dims the map with "Connection lost" and the age of its data within 2 s of the socket dropping, and undims when live again', async () => {
    const overlay = page.locator('#map .map-link-lost');
    expect(await overlay.isVisible()).toBe(false);
    // Offline first, so the page cannot come straight back; then the server drops its socket.
    await context.setOffline(true);
    expect(running.gateway.services.websockets.dropAll()).toBeGreaterThan(0);
    await overlay.waitFor({ state: 'visible', timeout: LINK_LOST_WITHIN_MS });
    expect(await page.locator('#map').getAttribute('data-link')).toBe('lost');
    await expect.poll(() => overlay.textContent(), { timeout: 5_000 }).toMatch(/^Connection lost.*data from [1-9]\d* s ago/);
    // The text alternative under the map no longer calls the devices live.
    expect(await page.locator('#map-summary').textContent()).toMatch(/\d+ devices as of \d+ s ago \(connection lost\)/);
    // The devices are dimmed with the plan: nothing on the map still reads as live.
    const opacity = await page.locator('.floor-map').evaluate((map) => Number(getComputedStyle(map).opacity));
    expect(opacity).toBeLessThan(0.7);
    await screenshot(page, 'connection-lost');

    await context.setOffline(false);
    await page.locator('#connection[data-state="live"]').waitFor({ timeout: 30_000 });
    await overlay.waitFor({ state: 'hidden', timeout: LINK_LOST_WITHIN_MS });
    expect(await page.locator('#map').getAttribute('data-link')).toBe('live');
    expect(await page.locator('#map-summary').textContent()).toMatch(/\d+ devices live, /);
    await screenshot(page, 'live-again');
  });

  it('fits a 390 px phone: no sideways scroll and Sign out within the screen', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 1, isMobile: true, hasTouch: true });
    try {
      const small = await phone.newPage();
      await signIn(small);
      await small.locator('.floor-map image.floorplan').waitFor();
      const widths = await small.evaluate(() => ({
        scroll: document.documentElement.scrollWidth,
        body: document.body.scrollWidth,
        inner: window.innerWidth,
      }));
      expect(widths.scroll).toBeLessThanOrEqual(widths.inner);
      expect(widths.body).toBeLessThanOrEqual(widths.inner);
      const signOut = (await small.locator('#sign-out').boundingBox())!;
      expect(signOut).not.toBeNull();
      expect(signOut.x).toBeGreaterThanOrEqual(0);
      expect(signOut.x + signOut.width).toBeLessThanOrEqual(390);
      expect(signOut.y + signOut.height).toBeLessThanOrEqual(844);
      await screenshot(small, 'phone-390');
    } finally {
      await phone.close();
    }
  });
});
