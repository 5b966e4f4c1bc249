import { createVenue } from '../testkit/cartography.js';
import { adminClient, createOrganization, createUser } from '../testkit/identity.js';
import { startTestGateway } from '../testkit/test-gateway.js';
import { summarise, type Figure, type Scenario } from './harness.js';

const SCENARIO = 'alarm-button';
/** Uploads of 1,000 danger poses each: five new devices (raises), then five repeats of them (debounced counts). */
const FLOODS = 10;
const PRESSES = 1000;
const BASELINE_UPLOADS = 50;
/** The target: another organization's upload is delayed by less than this during a flood (review NH4). */
const TARGET_DELAY_MS = 100;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A plain user holds the danger button: uploads of 1,000 danger poses each, back to back. Meanwhile another
 * organization uploads one pose at a time; its upload times during the flood are compared with the same uploads
 * before it, and with the same flood without the button (the control: what 1,000 poses cost the others anyway).
 * Before the fold (one alarm transaction per pose) they waited seconds on embedded storage.
 */
export const alarmButtonScenario: Scenario = {
  name: SCENARIO,
  async run(): Promise<Figure[]> {
    const running = await startTestGateway();
    try {
      const admin = await adminClient(running.client);
      const venue = await createVenue(admin, 'Flood venue');
      const flooder = await createUser(admin, 'user');
      const other = await createOrganization(admin);
      const quietVenue = await createVenue(other.client, 'Quiet venue');
      let step = 0;
      const quietUpload = async () => {
        const pose = {
          device_id: 'quiet',
          timestamp: Date.now(),
          building_id: quietVenue.building.id,
          floor_id: quietVenue.floors[0].id,
          x: 10 + (step++ % 50),
          y: 10,
        };
        const started = performance.now();
        const response = await other.client.post('/api/v1/realtime/positions', { poses: [pose] });
        if (response.status !== 204) throw new Error(`quiet upload: ${response.status} ${response.text}`);
        return performance.now() - started;
      };
      // Warm-up (JIT, caches, the first commit of each table), untimed.
      const warmFrom = Date.now() - PRESSES;
      const warmUp = Array.from({ length: PRESSES }, (_, index) => ({
        device_id: 'warm-up',
        timestamp: warmFrom + index,
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        x: 20,
        y: 20,
        danger: index === 0,
      }));
      await flooder.client.post('/api/v1/realtime/positions', { poses: warmUp });
      const baseline: number[] = [];
      for (let i = 0; i < BASELINE_UPLOADS; i++) baseline.push(await quietUpload());

      const figures: Figure[] = [
        {
          scenario: SCENARIO,
          metric: 'other organization one-pose upload, before the floods, p50',
          value: summarise(baseline).p50,
          unit: 'ms',
        },
      ];
      // The same flood without the button is the control: what ingesting 1,000 poses costs the others anyway.
      for (const danger of [true, false]) {
        const label = danger ? 'danger' : 'plain (control)';
        let flooding = true;
        const during: number[] = [];
        const quiet = (async () => {
          while (flooding) {
            during.push(await quietUpload());
            await sleep(5);
          }
        })();
        const floods: number[] = [];
        for (let flood = 0; flood < FLOODS; flood++) {
          const from = Date.now() - PRESSES;
          const poses = Array.from({ length: PRESSES }, (_, index) => ({
            device_id: `held-${flood % 5}`,
            timestamp: from + index,
            building_id: venue.building.id,
            floor_id: venue.floors[0].id,
            x: 20,
            y: 20,
            danger,
          }));
          const started = performance.now();
          const response = await flooder.client.post('/api/v1/realtime/positions', { poses });
          if (response.status !== 204) throw new Error(`flood upload: ${response.status} ${response.text}`);
          floods.push(performance.now() - started);
        }
        flooding = false;
        await quiet;
        const meanwhile = summarise(during);
        const delay = meanwhile.max - summarise(baseline).p50;
        figures.push(
          { scenario: SCENARIO, metric: `${label}: upload of ${PRESSES} poses, p50`, value: summarise(floods).p50, unit: 'ms' },
          {
            scenario: SCENARIO,
            metric: `${label}: other organization's upload meanwhile, p50 (n=${meanwhile.n})`,
            value: meanwhile.p50,
            unit: 'ms',
          },
          {
            scenario: SCENARIO,
            metric: `${label}: other organization's delay (max meanwhile - p50 before)`,
            value: delay,
            unit: 'ms',
            ...(danger ? { target: `< ${TARGET_DELAY_MS} ms`, met: delay < TARGET_DELAY_MS } : {}),
          },
        );
      }
      return figures;
    } finally {
      await running.stop();
    }
  },
};
