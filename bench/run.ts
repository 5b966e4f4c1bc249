import { alarmButtonScenario } from './alarm-button.bench.js';
import { alarmEscalationScenario } from './alarm-escalation.bench.js';
import { buildingDetailScenario } from './cartography.bench.js';
import { csvExportScenario } from './history.bench.js';
import { detectionScenario } from './detection.bench.js';
import { eventTimeScenario } from './event-time.bench.js';
import { erasureScenario } from './erasure.bench.js';
import { fairnessScenario } from './fairness.bench.js';
import { geofencingScenario } from './geofencing.bench.js';
import { ingestScenario } from './ingest.bench.js';
import { materializerScenario } from './materializer.bench.js';
import { musterScenario } from './muster.bench.js';
import { positionsWriteScenario } from './positions-write.bench.js';
import { report, type Figure, type Scenario } from './harness.js';
import { redisClusterScenario } from './redis-cluster.bench.js';
import { reportsScenario } from './reports.bench.js';
import { routingScenario } from './routing.bench.js';
import { scaleOutScenario } from './scale-out.bench.js';
import { silenceSweepScenario } from './silence-sweep.bench.js';

/**
 * `npm run bench [-- scenario ...]`: runs each scenario on the drivers the environment selects (embedded by
 * default; DATABASE_URL / REDIS_URL or REDIS_CLUSTER_NODES for PostgreSQL and Redis), prints a table and writes bench/results/.
 * Figures are reported against their targets, never asserted: speed is measured here, not in the tests.
 */
const scenarios: Scenario[] = [
  buildingDetailScenario,
  csvExportScenario,
  ingestScenario,
  detectionScenario,
  geofencingScenario,
  reportsScenario,
  materializerScenario,
  positionsWriteScenario,
  routingScenario,
  scaleOutScenario,
  alarmButtonScenario,
  alarmEscalationScenario,
  silenceSweepScenario,
  fairnessScenario,
  musterScenario,
  redisClusterScenario,
  eventTimeScenario,
  erasureScenario,
];

const wanted = process.argv.slice(2);
const figures: Figure[] = [];
for (const scenario of scenarios) {
  if (wanted.length > 0 && !wanted.includes(scenario.name)) continue;
  process.stdout.write(`running ${scenario.name}...\n`);
  figures.push(...(await scenario.run()));
}
report(figures, {
  node: process.version,
  storage: process.env.DATABASE_URL ? 'postgresql' : 'embedded',
  bus: process.env.REDIS_CLUSTER_NODES ? 'redis-cluster' : process.env.REDIS_URL ? 'redis' : 'in-process',
  cpus: (await import('node:os')).cpus().length,
});
process.exit(0);
