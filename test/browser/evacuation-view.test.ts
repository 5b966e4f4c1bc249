import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, floorplanPng, hasChromium } from '../../testkit/browser.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser } from '../../testkit/identity.js';
import { uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * The console's evacuation view (issue 31) in Debian's Chromium against a real gateway: a drill started from the
 * console, the board filling live as people reach the assembly points, a warden's "mark safe" with a comment
 * (stored), the rescuers' route to someone missing, the end, a tablet, and a roll of 5,000 that renders and scrolls.
 * Each step leaves a screenshot in test-artifacts/.
 */

const title = `evacuation view in Chromium (${driverLabel})`;
if (!hasChromium) console.warn(`SKIPPED ${title}: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`);

describe.skipIf(!hasChromium)(title, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let buildingId: number;
  let ground: number;
  let first: number;
  const PLAN = { width: 800, height: 600, scale: 8 }; // 100 m x 75 m at 8 px per metre
  const problems: string[] = [];
  let shot = 0;
  const screenshot = async (name: string, on: Page = page) => {
    await on.screenshot({ path: new URL(`evacuation-${++shot}-${name}.png`, ARTIFACTS).pathname, fullPage: true });
  };
  const upload = async (poses: object[]) => {
    const response = await admin.post('/api/v1/realtime/positions', { poses });
    expect(response.status, response.text).toBe(204);
  };
  const base = () => `/api/v1/buildings/${buildingId}/evacuations`;
  const figure = (tile: string) => page.locator(`#evacuation .evac-tile-${tile} .evac-figure`);
  /** Six named people: three walk out to the assembly points, three stay inside (one upstairs). */
  const people = [
    { name: 'Ana Ruiz (nurse)', device: 'tag-ana', floor: 'ground', x: 20, y: 45 },
    { name: 'Ben Ode (porter)', device: 'tag-ben', floor: 'ground', x: 60, y: 20 },
    { name: 'Carmen Vidal (doctor)', device: 'tag-carmen', floor: 'first', x: 30, y: 40 },
    { name: 'David Sol (visitor)', device: 'tag-david', floor: 'ground', x: 45, y: 35 },
    { name: 'Elena Mar (patient)', device: 'tag-elena', floor: 'first', x: 80, y: 40 },
    { name: 'Farid Nour (cleaner)', device: 'tag-farid', floor: 'ground', x: 85, y: 60 },
  ];
  const userIds = new Map<string, string>();
  const pose = (device: string, floor: 'ground' | 'first', x: number, y: number, at = Date.now()) => ({
    device_id: device,
    user_id: userIds.get(device),
    timestamp: at,
    building_id: buildingId,
    floor_id: floor === 'ground' ? ground : first,
    x,
    y,
  });

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    for (const name of readdirSync(ARTIFACTS)) if (/^evacuation-.*\.png$/.test(name)) rmSync(new URL(name, ARTIFACTS));
    // The 5,000-person roll is uploaded at once: room for it in the pose budget.
    running = await startTestGateway({
      RATE_LIMIT_POSES_PER_SECOND: '100000',
      RATE_LIMIT_POSES_BURST: '100000',
      RATE_LIMIT_USER_POSES_PER_SECOND: '100000',
    });
    admin = await adminClient(running.client);
    const building = await admin.post('/api/v1/buildings', {
      name: 'Muster clinic',
      location: { lat: 40.4168, lng: -3.7038 },
      dimensions: { width: 100, length: 75 },
      rotation: 0,
    });
    expect(building.status, building.text).toBe(201);
    buildingId = building.body.id;
    const image = await uploadImage(admin, floorplanPng(PLAN.width, PLAN.height, PLAN.scale));
    const floor = async (level: number, name: string) => {
      const created = await admin.post('/api/v1/floors', {
        building_id: buildingId,
        level,
        level_height: level * 4,
        name,
        map_id: image.body.id,
        scale: PLAN.scale,
      });
      expect(created.status, created.text).toBe(201);
      return created.body.id as number;
    };
    ground = await floor(0, 'Ground');
    first = await floor(1, 'First');
    // A corridor along y=40 out to both assembly points, a lift at x=95 to the first floor's corridor.
    const paths = await admin.put(`/api/v1/buildings/${buildingId}/paths`, {
      nodes: [
        { id: 1, floor_id: ground, x: -10, y: 40 },
        { id: 2, floor_id: ground, x: 50, y: 40 },
        { id: 3, floor_id: ground, x: 95, y: 40 },
        { id: 4, floor_id: ground, x: 110, y: 5 },
        { id: 5, floor_id: first, x: 95, y: 40 },
        { id: 6, floor_id: first, x: 10, y: 40 },
      ],
      links: [
        { source: 1, target: 2, origin: 'both', accessible: true },
        { source: 2, target: 3, origin: 'both', accessible: true },
        { source: 3, target: 4, origin: 'both', accessible: true },
        { source: 3, target: 5, origin: 'both', accessible: true, tags: ['lift'] },
        { source: 5, target: 6, origin: 'both', accessible: true },
      ],
    });
    expect(paths.status, paths.text).toBe(200);
    const fence = async (body: object) => {
      const created = await admin.post('/api/v1/geofences', { building_id: buildingId, floor_id: ground, ...body });
      expect(created.status, created.text).toBe(201);
    };
    // Two assembly points outside the footprint, and a ward inside (its name says where someone was).
    await fence({
      name: 'Car park',
      type: 'POLYGON',
      muster_point: true,
      cartesians: [
        [104, 0],
        [116, 0],
        [116, 10],
        [104, 10],
        [104, 0],
      ],
    });
    await fence({ name: 'Lawn', type: 'CIRCLE', muster_point: true, cartesians: [[-10, 40]], radius: 6 });
    await fence({
      name: 'Ward A',
      type: 'POLYGON',
      cartesians: [
        [70, 50],
        [100, 50],
        [100, 75],
        [70, 75],
        [70, 50],
      ],
    });
    for (const person of people) {
      const user = await admin.post('/api/v1/users', {
        email: `${person.device}-${randomUUID().slice(0, 8)}@example.test`,
        password: 'a-long-password-1',
        role: 'user',
        full_name: person.name,
      });
      expect(user.status, user.text).toBe(201);
      userIds.set(person.device, user.body.id);
    }
    // Fixes a second apart, oldest first: the missing of a floor are listed longest unseen first.
    const seen = Date.now() - people.length * 1000;
    await upload(people.map((p, index) => pose(p.device, p.floor as 'ground' | 'first', p.x, p.y, seen + index * 1000)));

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
    context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
    page = await context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      // The browser's own line for a reconnection tried while the tests hold the page offline is expected.
      if (message.type() === 'error' && !message.text().includes('ERR_INTERNET_DISCONNECTED')) problems.push(`console: ${message.text()}`);
    });
    await page.goto(`${running.baseUrl}/console`);
    await page.locator('#email').fill(ADMIN_EMAIL);
    await page.locator('#password').fill(ADMIN_PASSWORD);
    await page.keyboard.press('Enter');
    await page.locator('#connection[data-state="live"]').waitFor();
    await page.selectOption('#building', String(buildingId));
    await page.locator('#evacuation .evac-idle-text', { hasText: 'No evacuation in progress in Muster clinic' }).waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await running?.stop();
  });

  it('starts a drill from the console: everyone in the building on the roll, missing by floor, marked as a drill', async () => {
    await page.locator('#evacuation .evac-start-drill').click();
    await page.locator('.evac-dialog .evac-dialog-input').fill('Quarterly fire drill');
    await page.locator('.evac-dialog .evac-confirm').click();
    await page.locator('#evacuation[data-state="active"][data-drill="true"]').waitFor();
    await page.locator('#evacuation .evac-missing[data-count="6"]').waitFor();
    expect(await figure('roll').textContent()).toBe('6');
    expect(await figure('missing').textContent()).toBe('6');
    expect(await figure('safe').textContent()).toBe('0');
    expect(await page.locator('#evacuation .evac-kind').textContent()).toBe('DRILL · practice');
    expect(await page.locator('#evacuation .evac-meta').textContent()).toContain('Quarterly fire drill');
    // The missing by floor, ground first; each with the zone or place of their last fix and its age.
    expect(await page.locator('#evacuation .evac-floor-heading').allTextContents()).toEqual(['Ground · 4', 'First · 2']);
    const farid = page.locator('#evacuation .evac-person', { hasText: 'Farid Nour (cleaner)' });
    expect(await farid.locator('.evac-where').textContent()).toBe('Ward A, x 85 m, y 60 m');
    expect(await farid.locator('.evac-age').textContent()).toMatch(/^seen \d+ s ago$/);
    // Each floor's plan shows its missing, red, where last seen; the assembly points are on the ground floor's.
    await page.locator(`.muster-floor[data-floor-id="${ground}"] .muster-person`).nth(3).waitFor();
    expect(await page.locator(`.muster-floor[data-floor-id="${first}"] .muster-person`).count()).toBe(2);
    expect(await page.locator(`.muster-floor[data-floor-id="${ground}"] .muster-point`).count()).toBe(2);
    const declared = (await admin.get(`${base()}/current`)).body;
    expect(declared).toMatchObject({ drill: true, note: 'Quarterly fire drill', started_by: { email: ADMIN_EMAIL } });
    await screenshot('drill-started');
  });

  it('fills live as people reach the assembly points: counts, points, the missing list and the plans', async () => {
    // Ana and Ben at the car park, David on the lawn: two fixes each, a second apart, both after the declaration
    // (an enter before it does not count).
    const arrivals = [
      ['tag-ana', 110, 5],
      ['tag-ben', 108, 3],
      ['tag-david', -9, 41],
    ] as const;
    await upload(arrivals.map(([device, x, y]) => pose(device, 'ground', x, y)));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await upload(arrivals.map(([device, x, y]) => pose(device, 'ground', x + 0.5, y)));
    await page.locator('#evacuation .evac-tile-safe .evac-figure', { hasText: /^3$/ }).waitFor();
    expect(await figure('missing').textContent()).toBe('3');
    await page.locator('#evacuation .evac-missing[data-count="3"]').waitFor();
    expect(await page.locator('#evacuation .evac-person .evac-person-name').allTextContents()).toEqual([
      'Farid Nour (cleaner)',
      'Carmen Vidal (doctor)',
      'Elena Mar (patient)',
    ]);
    const points = await page
      .locator('#evacuation .evac-point')
      .evaluateAll((items) =>
        items.map((item) => [item.querySelector('.evac-point-name')?.textContent, item.querySelector('.evac-point-count')?.textContent]),
      );
    expect(points).toEqual([
      ['Car park', '2'],
      ['Lawn', '1'],
    ]);
    expect(await page.locator('#evacuation .evac-recent li').count()).toBe(3);
    expect(await page.locator('#evacuation .evac-recent').textContent()).toContain('David Sol (visitor) at Lawn');
    await page.locator(`.muster-floor[data-floor-id="${ground}"] .muster-point[data-count="2"]`).waitFor();
    expect(await page.locator(`.muster-floor[data-floor-id="${ground}"] .muster-person`).count()).toBe(1);
    expect(await page.locator('#evacuation progress').evaluate((bar) => (bar as HTMLProgressElement).value)).toBe(50);
    // Farid moves inside: his place and the plan follow the live positions.
    await upload([pose('tag-farid', 'ground', 40, 20)]);
    await page
      .locator('#evacuation .evac-person', { hasText: 'Farid' })
      .locator('.evac-where', { hasText: /^x 40 m, y 20 m$/ })
      .waitFor();
    await screenshot('filling-live');
  });

  it('draws the rescuers\u2019 route to a missing person chosen in the list, from the nearest assembly point', async () => {
    await page.locator('#evacuation .evac-person-name', { hasText: 'Elena Mar' }).click();
    await page.locator('#evacuation .evac-route', { hasText: /^Route to Elena Mar \(patient\) from / }).waitFor();
    const text = (await page.locator('#evacuation .evac-route').textContent())!;
    expect(text).toMatch(/from (Car park|Lawn): \d+ m, .*\(Ground → First\)\.$/);
    await page.locator(`.muster-floor[data-floor-id="${first}"] .muster-route polyline`).waitFor({ state: 'attached' });
    expect(await page.locator(`.muster-floor[data-floor-id="${first}"] .muster-person.selected`).getAttribute('data-entry')).toBe(
      `user:${userIds.get('tag-elena')}`,
    );
  });

  it('marks a person safe with a comment in one dialog: the row leaves the list and the gateway stores who and why', async () => {
    const carmen = page.locator('#evacuation .evac-person', { hasText: 'Carmen Vidal' });
    await carmen.locator('.evac-mark-safe').click();
    const dialog = page.locator('.evac-dialog');
    expect(await dialog.locator('h2').textContent()).toBe('Mark Carmen Vidal (doctor) safe');
    await dialog.locator('.evac-dialog-input').fill('Seen at the west gate by J. Ortiz');
    await screenshot('mark-safe-dialog');
    await dialog.locator('.evac-confirm').click();
    await page.locator('#evacuation .evac-missing[data-count="2"]').waitFor();
    expect(await figure('safe').textContent()).toBe('4');
    expect(await page.locator('#evacuation .evac-recent li').first().textContent()).toContain(
      `Carmen Vidal (doctor) marked by ${ADMIN_EMAIL}: “Seen at the west gate by J. Ortiz”`,
    );
    const stored = (await admin.get(`${base()}/current`)).body;
    expect(stored.roll.find((entry: { entry: string }) => entry.entry === `user:${userIds.get('tag-carmen')}`)).toMatchObject({
      status: 'safe_manual',
      comment: 'Seen at the west gate by J. Ortiz',
      marked_by: { email: ADMIN_EMAIL },
    });
    expect(stored.counts).toMatchObject({ on_roll: 6, safe: 3, safe_manual: 1, missing: 2 });
    // Cancelling marks nobody.
    await page.locator('#evacuation .evac-person', { hasText: 'Farid' }).locator('.evac-mark-safe').click();
    await dialog.locator('.evac-cancel').click();
    expect(await page.locator('#evacuation .evac-missing').getAttribute('data-count')).toBe('2');
  });

  it('shows on a wall screen and on a tablet: the view alone, nothing sideways, buttons big enough to touch', async () => {
    await page.locator('#evacuation .evac-wall').click();
    expect(await page.locator('main.panes').isVisible()).toBe(false);
    await screenshot('wall-screen');
    await page.locator('#evacuation .evac-wall').click();
    expect(await page.locator('main.panes').isVisible()).toBe(true);

    const tablet = await browser.newContext({ viewport: { width: 820, height: 1180 }, isMobile: true, hasTouch: true });
    const small = await tablet.newPage();
    try {
      await small.goto(`${running.baseUrl}/console`);
      await small.locator('#email').fill(ADMIN_EMAIL);
      await small.locator('#password').fill(ADMIN_PASSWORD);
      await small.keyboard.press('Enter');
      await small.selectOption('#building', String(buildingId));
      await small.locator('#evacuation .evac-missing[data-count="2"]').waitFor();
      const fits = async () => {
        const widths = await small.evaluate(() => ({ page: document.documentElement.scrollWidth, view: window.innerWidth }));
        expect(widths.page).toBeLessThanOrEqual(widths.view);
        const button = (await small.locator('#evacuation .evac-mark-safe').first().boundingBox())!;
        expect(button.height).toBeGreaterThanOrEqual(44);
      };
      await fits();
      // A wall screen or a tablet on the wall opens /console#evacuation: the building shown last, the view alone.
      await small.goto(`${running.baseUrl}/console#evacuation`);
      await small.reload();
      await small.locator('body.evacuation-focus #evacuation .evac-missing[data-count="2"]').waitFor();
      expect(await small.locator('main.panes').isVisible()).toBe(false);
      await fits();
      await screenshot('tablet', small);
    } finally {
      await tablet.close();
    }
  });

  it('is not shown to a user who is neither an admin nor a user manager (the roll shows where everyone is)', async () => {
    const user = await createUser(admin, 'user');
    const other = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const own = await other.newPage();
    try {
      await own.goto(`${running.baseUrl}/console`);
      await own.locator('#email').fill(user.email);
      await own.locator('#password').fill(user.password);
      await own.keyboard.press('Enter');
      await own.locator('#connection[data-state="live"]').waitFor();
      await own.selectOption('#building', String(buildingId));
      await own.locator('#map[aria-busy="false"]').waitFor();
      expect(await own.locator('#evacuation').isHidden()).toBe(true);
      expect(await own.locator('#evacuation .evac-start-drill').count()).toBe(0);
    } finally {
      await other.close();
    }
  });

  /** Takes the page offline and drops its socket; answers once the page knows and has failed to come back. */
  const dropConnection = async () => {
    const retry = page.waitForEvent('websocket', { timeout: 20_000 });
    await context.setOffline(true);
    expect(running.gateway.services.websockets.dropAll()).toBeGreaterThan(0);
    await page.locator('#evacuation[data-link="lost"]').waitFor();
    const failed = await retry;
    if (!failed.isClosed()) await new Promise((resolve) => (failed.once('socketerror', resolve), failed.once('close', resolve)));
  };

  it('after a dropped connection, shows what changed on the roll meanwhile', async () => {
    await dropConnection();
    expect(await page.locator('#evacuation .evac-link-lost').textContent()).toMatch(/^Connection lost · figures from \d+ s ago$/);
    const farid = `user:${userIds.get('tag-farid')}`;
    const marked = await admin.post(`${base()}/current/roll/${encodeURIComponent(farid)}/safe`, { comment: 'At the gate' });
    expect(marked.status, marked.text).toBe(200);
    expect(await page.locator('#evacuation .evac-missing').getAttribute('data-count')).toBe('2');
    await context.setOffline(false);
    await page.locator('#evacuation[data-link="live"] .evac-missing[data-count="1"]').waitFor({ timeout: 30_000 });
    expect(await figure('safe').textContent()).toBe('5');
    expect(await page.locator('#evacuation .evac-person-name').allTextContents()).toEqual(['Elena Mar (patient)']);
  });

  it('ends the drill: whoever is still missing is listed as not found', async () => {
    await page.locator('#evacuation .evac-end').click();
    expect(await page.locator('.evac-dialog p').textContent()).toBe('1 still missing will be recorded as not found.');
    await page.locator('.evac-dialog .evac-confirm').click();
    await page.locator('#evacuation[data-state="ended"]').waitFor();
    await page.locator('#evacuation .evac-tile-missing .evac-tile-label', { hasText: 'Not found' }).waitFor();
    expect(await figure('missing').textContent()).toBe('1');
    expect(await page.locator('#evacuation .evac-mark-safe:visible').count()).toBe(0);
    expect((await admin.get(`${base()}/current`)).status).toBe(404);
    await page.locator('#evacuation .evac-dismiss').click();
    await page.locator('#evacuation[data-state="idle"]').waitFor();
    expect(problems.join('\n')).toBe('');
  });

  it('renders a roll of 5,000 and scrolls to its last person', async () => {
    const big = await admin.post('/api/v1/buildings', {
      name: 'Muster plant',
      location: { lat: 40.42, lng: -3.71 },
      dimensions: { width: 200, length: 150 },
      rotation: 0,
    });
    expect(big.status, big.text).toBe(201);
    const plant = big.body.id as number;
    const floorIds: number[] = [];
    for (const level of [0, 1, 2]) {
      const created = await admin.post('/api/v1/floors', { building_id: plant, level, level_height: level * 4, name: `Hall ${level}` });
      expect(created.status, created.text).toBe(201);
      floorIds.push(created.body.id);
    }
    const now = Date.now();
    const poses = Array.from({ length: 5000 }, (_, i) => ({
      device_id: `w${String(i).padStart(4, '0')}`,
      timestamp: now - (i % 600) * 1000,
      building_id: plant,
      floor_id: floorIds[i % 3],
      x: 5 + ((i * 37) % 190),
      y: 5 + ((i * 53) % 140),
    }));
    for (let i = 0; i < poses.length; i += 1000) await upload(poses.slice(i, i + 1000)); // DEVICES_MAX_NEW_PER_UPLOAD
    const declared = await admin.post(`/api/v1/buildings/${plant}/evacuations`, { drill: true });
    expect(declared.status, declared.text).toBe(201);
    expect(declared.body.counts.on_roll).toBe(5000);

    await page.reload();
    await page.locator('#connection[data-state="live"]').waitFor();
    await page.selectOption('#building', String(plant));
    await page.locator('#evacuation .evac-missing[data-count="5000"]', { hasText: '' }).waitFor({ timeout: 60_000 });
    expect(await figure('roll').textContent()).toBe('5000');
    expect(await page.locator('#evacuation .evac-person').count()).toBe(5000);
    expect(await page.locator('#evacuation .evac-floor-heading').allTextContents()).toEqual([
      'Hall 0 · 1667',
      'Hall 1 · 1667',
      'Hall 2 · 1666',
    ]);
    // Scrolled to the end, the last person of the top floor is on screen and can be marked safe.
    const list = page.locator('#evacuation .evac-missing');
    await list.evaluate((element) => element.scrollTo({ top: element.scrollHeight }));
    const last = page.locator('#evacuation .evac-floor').last().locator('.evac-person').last();
    await last.locator('.evac-mark-safe').waitFor();
    const [box, view] = [(await last.boundingBox())!, (await list.boundingBox())!];
    expect(box.y).toBeGreaterThanOrEqual(view.y - 1);
    expect(box.y + box.height).toBeLessThanOrEqual(view.y + view.height + 1);
    await last.locator('.evac-mark-safe').click();
    await page.locator('.evac-dialog .evac-confirm').click();
    await page.locator('#evacuation .evac-missing[data-count="4999"]').waitFor();
    expect(await figure('safe').textContent()).toBe('1');
    await screenshot('roll-of-5000');

    // Ended while the page was offline: back online, the view says so (the replay alone has nothing to say).
    await dropConnection();
    const ended = await admin.post(`/api/v1/buildings/${plant}/evacuations/current/end`, {});
    expect(ended.status, ended.text).toBe(200);
    await context.setOffline(false);
    await page.locator('#evacuation[data-state="ended"][data-link="live"]').waitFor({ timeout: 30_000 });
    expect(await figure('missing').textContent()).toBe('4999');
    expect(problems.join('\n')).toBe('');
  });
});
