import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, hasChromium } from '../../testkit/browser.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * Event time in the console (issue 30), in Debian's Chromium: an alarm found from fixes that arrived late says by
 * how much and when it happened; a silence DEADMAN whose device's buffer came in says what it shows ("Reported
 * late: was moving"), and gets it live when the evidence arrives.
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
});
