import { AlarmEscalation } from '../gateway/alarms/alarm-escalation.js';
import { typesOfSeverity } from '../shared/detection/alarm-severity.js';
import { adminClient } from '../testkit/identity.js';
import { startTestGateway } from '../testkit/test-gateway.js';
import { medianMs, type Figure, type Scenario } from './harness.js';

/**
 * What escalation adds to the once-a-second detection sweep with 10,000 OPEN alarms (BENCH_OPEN_ALARMS): a
 * third of them critical and unconfirmed but not yet due (scheduled by a first pass), the rest high and normal.
 * The figure is one `AlarmEscalation.sweep` pass, the median of 20, on the drivers the environment selects; then
 * the cost of escalating 100 due alarms in one pass (each its own transaction, event and push).
 */
export const alarmEscalationScenario: Scenario = {
  name: 'alarm-escalation',
  async run(): Promise<Figure[]> {
    const open = Number(process.env.BENCH_OPEN_ALARMS ?? 10_000);
    const running = await startTestGateway({ LOG_LEVEL: 'silent' });
    try {
      const { storage, alarms } = running.gateway.services;
      const admin = await adminClient(running.client);
      const organization = (await admin.get('/api/v1/organizations/current_organization')).body.id as string;
      const types = [...typesOfSeverity('critical'), ...typesOfSeverity('high'), ...typesOfSeverity('normal')];
      // Raised a few seconds ago, one device each (one OPEN alarm per device and kind).
      await storage.execute(
        `insert into alarms (id, organization_id, seq, type, state, building_id, device_id, details, history, created_at, updated_at)
         select gen_random_uuid(), ?::uuid, 0, (?::text[])[1 + n % ?::int], 'OPEN', 1 + n % 20, 'bench-' || n, '{}', '[]', now(), now()
         from generate_series(1, ?::int) as n`,
        [organization, `{${types.join(',')}}`, types.length, open],
      );
      // Only this scenario's passes sweep: the gateway's own once-a-second sweep would race them for the same alarms.
      running.gateway.services.sweep.stop();
      const escalation = new AlarmEscalation(storage, alarms);
      await escalation.sweep(Date.now(), () => true); // schedules the alarms raised since the last pass
      await storage.execute('vacuum analyze alarms'); // as autovacuum would have by then: the scheduled rows leave the unscheduled index
      const idle = await medianMs(20, () => escalation.sweep(Date.now(), () => true));
      // 100 of them due now: the pass that escalates them.
      await storage.execute(
        `update alarms set escalate_at = now() - interval '1 second' where id in (select id from alarms where type = 'DANGER' limit 100)`,
      );
      const started = performance.now();
      const escalated = await escalation.sweep(Date.now(), () => true);
      const busy = performance.now() - started;
      return [
        {
          scenario: 'alarm-escalation',
          metric: `sweep pass, ${open} open alarms, none due`,
          value: idle,
          unit: 'ms',
          target: '< 5 ms',
          met: idle < 5,
        },
        { scenario: 'alarm-escalation', metric: `sweep pass escalating ${escalated} due alarms`, value: busy, unit: 'ms' },
      ];
    } finally {
      await running.stop();
    }
  },
};
