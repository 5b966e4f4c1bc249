import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, floorplanPng, hasChromium } from '../../testkit/browser.js';
import { squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient } from '../../testkit/identity.js';
import { uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * The control-room console driven in Debian's Chromium through playwright-core, against a real gateway:
 * signing in from the keyboard, the floor map with a live dot where the API put the device, the alarm
 * inbox working the transition table, and a dropped connection resumed with since_seq.
 */

/** The promise: a position shows on the map within a second of its upload. */
const WITHIN_A_SECOND = 1_000;

const title = `control-room console in Chromium (${driverLabel})`;
if (!hasChromium) console.warn(`SKIPPED ${title}: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`);

describe.skipIf(!hasChromium)(hasChromium ? title : `${title}: SKIPPED, ${CHROMIUM} is missing (apt-get install chromium)`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let building: { id: number; name: string };
  let ground: { id: number };
  let first: { id: number };
  /** An alarm raised on the ground floor, to select after a reload. */
  let groundAlarm: { id: string };
  const PLAN = { width: 800, height: 600, scale: 8 }; // a 100 m x 75 m building at 8 px per metre
  const requests: string[] = [];
  const problems: string[] = [];
  let shot = 0;

  const screenshot = async (name: string) => {
    await page.screenshot({ path: new URL(`console-${++shot}-${name}.png`, ARTIFACTS).pathname, fullPage: true });
  };
  const pose = (deviceId: string, x: number, y: number, extra: object = {}) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: building.id,
    floor_id: ground.id,
    x,
    y,
    ...extra,
  });
  const upload = async (...poses: object[]) => expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
  const raise = async (body: object) => {
    const response = await admin.post('/api/v1/alarms', body);
    expect(response.status, response.text).toBe(201);
    return response.body as { id: string; seq: number };
  };
  const alarmItem = (id: string) => page.locator(`li.alarm[data-alarm-id="${id}"]`);
  const visibleActions = async (item: Locator) =>
    (await item.locator('.alarm-actions button:visible').allTextContents()).map((text) => text.trim());
  /** A dot's centre, both in SVG user units (the plan's pixels) and on screen relative to the plan. */
  const dotPlacement = (deviceId: string) =>
    page.evaluate((id) => {
      const dot = document.querySelector<SVGCircleElement>(`g.device[data-device-id="${id}"] .device-dot`);
      const plan = document.querySelector<SVGGraphicsElement>('.floor-map image.floorplan');
      if (!dot || !plan) return null;
      const d = dot.getBoundingClientRect();
      const p = plan.getBoundingClientRect();
      return {
        cx: Number(dot.getAttribute('cx')),
        cy: Number(dot.getAttribute('cy')),
        screenX: d.x + d.width / 2 - p.x,
        screenY: d.y + d.height / 2 - p.y,
        planWidth: p.width,
        planHeight: p.height,
      };
    }, deviceId);
  const expectDotAt = async (deviceId: string, x: number, y: number, timeout = WITHIN_A_SECOND) => {
    const expected = { cx: x * PLAN.scale, cy: PLAN.height - y * PLAN.scale };
    await expect
      .poll(
        async () => {
          const at = await dotPlacement(deviceId);
          return at && Math.abs(at.cx - expected.cx) < 0.01 && Math.abs(at.cy - expected.cy) < 0.01;
        },
        { timeout, interval: 25 },
      )
      .toBe(true);
    // And where it lands on screen: the same point of the drawn plan, whatever its displayed size.
    const at = (await dotPlacement(deviceId))!;
    const ratio = at.planWidth / PLAN.width;
    expect(at.screenX).toBeCloseTo(expected.cx * ratio, 0);
    expect(at.screenY).toBeCloseTo(expected.cy * ratio, 0);
    expect(at.planHeight / at.planWidth).toBeCloseTo(PLAN.height / PLAN.width, 2);
  };

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    running = await startTestGateway();
    admin = await adminClient(running.client);
    const created = await admin.post('/api/v1/buildings', {
      name: 'Control HQ',
      location: { lat: 40.4168, lng: -3.7038 },
      dimensions: { width: 100, length: 75 },
      rotation: 0,
    });
    expect(created.status, created.text).toBe(201);
    building = created.body;
    const image = await uploadImage(admin, floorplanPng(PLAN.width, PLAN.height, PLAN.scale));
    expect(image.status, image.text).toBe(201);
    const groundFloor = await admin.post('/api/v1/floors', {
      building_id: building.id,
      level: 0,
      name: 'Ground',
      map_id: image.body.id,
      scale: PLAN.scale,
    });
    expect(groundFloor.status, groundFloor.text).toBe(201);
    ground = groundFloor.body;
    const firstFloor = await admin.post('/api/v1/floors', { building_id: building.id, level: 1, name: 'First' });
    expect(firstFloor.status, firstFloor.text).toBe(201);
    first = firstFloor.body;
    const zones = [
      { name: 'Ward A', type: 'POLYGON', cartesians: squareCartesians(8, 8, 25) },
      { name: 'Pharmacy', type: 'CIRCLE', cartesians: [[75, 55]], radius: 8 },
      {
        name: 'Corridor',
        type: 'LINE',
        cartesians: [
          [5, 40],
          [95, 40],
        ],
        radius: 1,
      },
      { name: 'Exit', type: 'POINT', cartesians: [[92, 6]], radius: 3 },
    ];
    for (const zone of zones)
      expect((await admin.post('/api/v1/geofences', { building_id: building.id, floor_id: ground.id, ...zone })).status).toBe(201);
    const event = await admin.post('/api/v1/events', {
      building_id: building.id,
      name: 'Coffee promo',
      info: '<p>2x1</p>',
      position: { floor_id: ground.id, radius: 6, cartesians: { x: 55, y: 15 } },
    });
    expect(event.status, event.text).toBe(201);
    // A device last seen a minute ago: it must be drawn, greyed.
    await upload(pose('stale-tag', 85, 65, { timestamp: Date.now() - 60_000 }));

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
    context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
    page = await context.newPage();
    page.on('request', (request) => requests.push(request.url()));
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/WebSocket connection to|ERR_INTERNET_DISCONNECTED/.test(message.text()))
        problems.push(`console: ${message.text()}`);
    });
  });

  afterAll(async () => {
    await context?.setOffline(false).catch(() => undefined);
    await browser?.close();
    await running?.stop();
  });

  it('is served from the gateway with caching headers and a strict CSP, and signs in from the keyboard', async () => {
    const html = await running.client.get('/console');
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toContain('text/html');
    expect(html.headers.get('cache-control')).toBe('no-cache');
    const csp = html.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(html.text).not.toMatch(/(src|href)="(https?:)?\/\//);
    const etag = html.headers.get('etag')!;
    expect((await running.client.get('/console', { 'if-none-match': etag })).status).toBe(304);
    const assets = [...html.text.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((match) => match[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const asset of assets) {
      const response = await running.client.get(asset);
      expect(response.status, asset).toBe(200);
      expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    }
    expect((await running.client.get('/console/assets/nothing-here.js')).status).toBe(404);

    await page.goto(`${running.baseUrl}/console`);
    await page.locator('#email:focus').waitFor(); // autofocus: the keyboard starts in the form
    await screenshot('sign-in');
    await page.keyboard.type(ADMIN_EMAIL);
    await page.keyboard.press('Tab');
    await page.keyboard.type('wrong-password');
    await page.keyboard.press('Enter');
    await page.locator('#login-error', { hasText: /Wrong e-mail or password/ }).waitFor();
    problems.length = 0; // the refused sign-in's 401 is logged by the browser: that one was expected
    await page.locator('#password').fill(ADMIN_PASSWORD);
    await page.keyboard.press('Enter');
    await page.locator('#connection[data-state="live"]').waitFor();
    expect(await page.locator('#user-email').textContent()).toBe(ADMIN_EMAIL);
    expect(page.url()).toBe(`${running.baseUrl}/console`); // no token in the address
    expect(await page.evaluate(() => location.search + location.hash)).toBe('');
    await screenshot('signed-in');
  });

  it('draws the chosen floor at its scale with zones, and puts an uploaded position at its place as a live dot', async () => {
    await page.selectOption('#building', String(building.id));
    await page.selectOption('#floor', String(ground.id));
    await page.locator('.floor-map image.floorplan').waitFor();
    expect(await page.locator('.floor-map').getAttribute('viewBox')).toBe(`0 0 ${PLAN.width} ${PLAN.height}`);
    expect(await page.locator('.floor-map g.zone').count()).toBe(4);
    expect(await page.locator('.floor-map g.event-area').count()).toBe(1);
    // The 25 m square of Ward A, from (8, 8): its corners at the scale, y flipped.
    const ward = await page.locator('g.zone-polygon polygon').getAttribute('points');
    expect(ward!.split(' ').slice(0, 3)).toEqual([`64,${600 - 64}`, `264,${600 - 64}`, `264,${600 - 264}`]);

    await upload(pose('nurse-7', 25, 20, { accuracy: 1.5 }));
    await expectDotAt('nurse-7', 25, 20);
    expect(await page.locator('g.device[data-device-id="nurse-7"] .device-label').textContent()).toBe('nurse-7');
    expect(await page.locator('g.device[data-device-id="nurse-7"]').getAttribute('data-stale')).toBe('false');
    await upload(pose('nurse-7', 60, 45, { accuracy: 1.5 }));
    await expectDotAt('nurse-7', 60, 45);
    // The device last heard of a minute ago is grey and says so.
    const stale = page.locator('g.device[data-device-id="stale-tag"]');
    expect(await stale.getAttribute('class')).toContain('stale');
    expect(await stale.locator('.device-label').textContent()).toMatch(/^stale-tag · stale \d+ (s|min)$/);
    expect(await page.locator('#map-summary').textContent()).toContain('1 device live, 1 stale');
    await screenshot('floor-map');

    // A floor without a plan is drawn on a plain background of the building's size.
    await page.selectOption('#floor', { label: 'First' });
    await page.locator('.floor-map rect.floor-plain').waitFor();
    expect(await page.locator('.floor-map').getAttribute('viewBox')).toBe('0 0 1000 750');
    expect(await page.locator('.floor-map g.device').count()).toBe(0);
    await screenshot('plain-floor');
    await page.selectOption('#floor', String(ground.id));
    await expectDotAt('nurse-7', 60, 45, 5_000);
  });

  it('announces a DANGER alarm raised through the API, shows it on the map, and confirms then closes it', async () => {
    const raised = await raise({ type: 'DANGER', device_id: 'nurse-7', building_id: building.id, floor_id: ground.id, x: 60, y: 45 });
    const item = alarmItem(raised.id);
    await item.waitFor();
    expect(await item.getAttribute('data-state')).toBe('OPEN');
    // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator.innerText (the rendered text), not the DOM property
    const text = await item.locator('.alarm-select').innerText();
    for (const part of ['DANGER', 'OPEN', 'NEW', 'nurse-7', 'Control HQ, Ground']) expect(text).toContain(part);
    expect(text).toMatch(/\d\d:\d\d:\d\d/);
    await page.locator('#announce').waitFor();
    expect(await page.locator('#announce-text').textContent()).toContain('DANGER · nurse-7');
    expect(await page.title()).toMatch(/^\(1\) NEW ALARM/);
    expect(await visibleActions(item)).toEqual(['Confirm', 'Mark false', 'Close']);
    await screenshot('alarm-announced');

    // Selecting it acknowledges it and marks the device and the alarm's place on the map.
    await item.locator('.alarm-select').click();
    await page.locator('g.device[data-device-id="nurse-7"].highlighted').waitFor();
    await page.locator('.floor-map .alarm-marker').waitFor();
    await page.locator('#announce').waitFor({ state: 'hidden' });

    // Confirm from the keyboard: the next Tab stop after the alarm is a real button, with a visible focus ring.
    const confirm = item.locator('button[data-state="CONFIRMED"]');
    await page.keyboard.press('Tab');
    expect(await confirm.evaluate((button) => button === document.activeElement)).toBe(true);
    expect(await confirm.evaluate((button) => getComputedStyle(button).outlineStyle)).toBe('solid');
    await page.keyboard.press('Enter');
    await page.locator(`li.alarm[data-alarm-id="${raised.id}"][data-state="CONFIRMED"]`).waitFor();
    expect(await item.locator('.state-badge').textContent()).toBe('CONFIRMED');
    expect(await visibleActions(item)).toEqual(['Close']); // CONFIRMED may only be closed (or OTHER)
    await screenshot('alarm-confirmed');

    // Closing a critical alarm asks why first.
    await item.locator('button[data-state="CLOSED"]').click();
    await item.locator('.resolve-comment:focus').fill('Nurse attended, false step');
    await item.locator('.resolve-submit').click();
    await page.locator(`li.alarm[data-alarm-id="${raised.id}"][data-state="CLOSED"]`).waitFor();
    expect(await visibleActions(item)).toEqual([]);
    const stored = await admin.get(`/api/v1/alarms/${raised.id}`);
    expect(stored.body.state).toBe('CLOSED');
    expect(stored.body.history.map((entry: { state: string }) => entry.state)).toEqual(['OPEN', 'CONFIRMED', 'CLOSED']);
    expect(stored.body.history[2]).toMatchObject({ by: { email: ADMIN_EMAIL }, comment: 'Nurse attended, false step' });
    await screenshot('alarm-closed');
  });

  it('reconnects by itself after a dropped connection and shows every alarm raised while it was away', async () => {
    // Offline first, so the page cannot come straight back; then the server drops its socket.
    const retry = page.waitForEvent('websocket', { timeout: 20_000 });
    await context.setOffline(true);
    expect(running.gateway.services.websockets.dropAll()).toBeGreaterThan(0);
    await page.locator('#connection:not([data-state="live"])').waitFor();
    // The page tries again by itself, and fails while the network is down.
    const failed = await retry;
    if (!failed.isClosed()) await new Promise((resolve) => (failed.once('socketerror', resolve), failed.once('close', resolve)));
    const missed = [
      await raise({ type: 'ASSISTANCE_REQUEST', device_id: 'porter-1', building_id: building.id, floor_id: ground.id, x: 30, y: 30 }),
      await raise({ type: 'DANGER', device_id: 'porter-2', building_id: building.id, floor_id: ground.id, x: 70, y: 20 }),
      await raise({ type: 'ASSISTANCE_REQUEST', device_id: 'porter-3', building_id: building.id }),
    ];
    expect(await page.locator('#connection').getAttribute('data-state')).not.toBe('live');
    for (const alarm of missed) expect(await alarmItem(alarm.id).count()).toBe(0);
    groundAlarm = missed[0]!;
    await screenshot('offline');

    await context.setOffline(false);
    await page.locator('#connection[data-state="live"]').waitFor({ timeout: 30_000 });
    for (const alarm of missed) await alarmItem(alarm.id).waitFor();
    for (const alarm of missed) expect(await alarmItem(alarm.id).getAttribute('data-state')).toBe('OPEN');
    // Newest first, and announced until acknowledged.
    const order = await page.locator('li.alarm').evaluateAll((items) => items.map((li) => li.getAttribute('data-alarm-id')));
    expect(order.slice(0, 3)).toEqual(missed.map((alarm) => alarm.id).reverse());
    expect(await page.locator('#announce-more').textContent()).toBe('and 2 more unacknowledged');
    await screenshot('reconnected');

    // Acknowledge all from the keyboard.
    await page.locator('#announce-ack-all').focus();
    await page.keyboard.press('Enter');
    await page.locator('#announce').waitFor({ state: 'hidden' });

    // Nothing left this origin, and the page ran without errors or CSP refusals.
    expect(requests.filter((url) => !url.startsWith(running.baseUrl) && !url.startsWith('blob:'))).toEqual([]);
    expect(problems).toEqual([]);
  });

  /** The building's detail, which fills the floor picker. */
  const detailUrl = () => `${running.baseUrl}/api/v1/buildings/${building.id}`;
  /** Reads the floor picker once the page says the shown building and floor are loaded. */
  const shownFloor = async () => {
    await page.locator('#map[aria-busy="false"]').waitFor();
    return page.locator('#floor').inputValue();
  };

  it('keeps the session and the last building and floor over a reload of the tab, whenever the building answers', async () => {
    // The view to come back is the first floor: not the ground floor a console without a saved view falls back to.
    await page.selectOption('#floor', String(first.id));
    await page.locator('.floor-map rect.floor-plain').waitFor();
    // The building's detail answered only once the socket is live: the order in which a CI run once read an
    // empty floor picker right after "live", made to happen every time.
    await page.route(detailUrl(), async (route) => {
      await page.locator('#connection[data-state="live"]').waitFor();
      await route.continue();
    });
    await page.reload();
    await page.locator('#connection[data-state="live"]').waitFor();
    expect(await shownFloor()).toBe(String(first.id));
    expect(await page.locator('#building').inputValue()).toBe(String(building.id));
    await page.locator('.floor-map rect.floor-plain').waitFor();
    await page.unroute(detailUrl());
  });

  it('after a reload, shows the alarm selected while the last view is still loading, even when the restore answers last', async () => {
    // The restore's request for the building held until the operator's own request has been answered.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let asked = 0;
    await page.route(detailUrl(), async (route) => {
      if (++asked === 1) await released;
      await route.continue();
    });
    await page.reload();
    await alarmItem(groundAlarm.id).locator('.alarm-select').click();
    await page.locator('.floor-map .alarm-marker').waitFor(); // the alarm's floor is on screen
    expect(await page.locator('#floor').inputValue()).toBe(String(ground.id));
    release();
    // The saved view (the first floor) answering last must not take the screen back from the alarm.
    expect(await shownFloor()).toBe(String(ground.id));
    expect(asked).toBeGreaterThanOrEqual(2);
    expect(await page.locator('.floor-map .alarm-marker').count()).toBe(1);
    await page.unroute(detailUrl());
  });

  it('signs out: the token is forgotten and the sign-in form comes back', async () => {
    await page.locator('#sign-out').click();
    await page.locator('#login-view').waitFor();
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual([]);
    expect(await page.locator('#connection').getAttribute('data-state')).toBe('signed-out');
    await page.reload();
    await page.locator('#email:focus').waitFor();
    await screenshot('signed-out');
  });
});
