import { DetectionEngine } from '../gateway/detection/detection-engine.js';
import { buildingRow, buildingRuntime, peekingRegistry } from '../testkit/detection.js';
import { positionRecord } from '../testkit/positions.js';
import { median, type Figure, type Scenario } from './harness.js';

const SCENARIO = 'silence-sweep';
const DEVICES = 100_000;
const BUILDINGS = 10;
const SILENCE_S = 60;
const SWEEPS = 15;

/** A one-floor building without fences, with dead-man silence on (storm thresholds left at their defaults). */
function runtimeOf(id: number) {
  const building = buildingRow({
    id,
    name: `B${id}`,
    locationLat: 40.4,
    locationLng: -3.7,
    width: 200,
    length: 200,
    deadmanSilenceS: SILENCE_S,
  });
  return buildingRuntime(building, [], { organizationId: 'bench', floorId: id });
}

/** The median of `SWEEPS` sweeps at `at(i)`, in ms, and the alarms they raised. */
function sweeps(engine: DetectionEngine, at: (i: number) => number): { ms: number; alarms: Map<string, number> } {
  const times: number[] = [];
  const alarms = new Map<string, number>();
  for (let i = 0; i < SWEEPS; i++) {
    const started = performance.now();
    const found = engine.sweep(at(i));
    times.push(performance.now() - started);
    for (const alarm of found.alarms) alarms.set(alarm.type, (alarms.get(alarm.type) ?? 0) + 1);
  }
  return { ms: median(times), alarms };
}

/**
 * The detection sweep's cost with 100,000 tracked devices in 10 buildings (dead-man silence on, so every device
 * is tallied for storms): all reporting, then one building's 10,000 devices silent together (the sweep that
 * starts its storm among them). Reported, not asserted.
 */
export const silenceSweepScenario: Scenario = {
  name: SCENARIO,
  async run(): Promise<Figure[]> {
    const runtimes = new Map(Array.from({ length: BUILDINGS }, (_, i) => [i + 1, runtimeOf(i + 1)]));
    const engine = new DetectionEngine(
      peekingRegistry((id) => runtimes.get(id)),
      3600_000,
    );
    const t0 = Date.UTC(2026, 0, 1);
    const observe = (d: number, at: number) => {
      const buildingId = (d % BUILDINGS) + 1;
      const record = positionRecord({
        organizationId: 'bench',
        deviceId: `dev-${d}`,
        buildingId,
        floorId: buildingId,
        x: 10 + (d % 180),
        y: 10 + ((d * 7) % 180),
        accuracy: 2,
        timestamp: at,
      });
      engine.observe(record, runtimes.get(buildingId));
    };
    for (let d = 0; d < DEVICES; d++) observe(d, t0);
    const quiet = sweeps(engine, (i) => t0 + 1000 + i * 1000);
    // Building 1's devices stop; the others report once more, so only building 1 falls silent.
    const later = t0 + SILENCE_S * 1000;
    for (let d = 0; d < DEVICES; d++) if (d % BUILDINGS !== 0) observe(d, later);
    const storm = sweeps(engine, (i) => t0 + SILENCE_S * 1000 + 1000 + i * 1000);
    const figures: Figure[] = [
      { scenario: SCENARIO, metric: `sweep, ${DEVICES} devices reporting`, value: quiet.ms, unit: 'ms', target: 'a few ms' },
      {
        scenario: SCENARIO,
        metric: `sweep, ${DEVICES / BUILDINGS} of them silent together (storm)`,
        value: storm.ms,
        unit: 'ms',
        target: 'a few ms',
      },
      {
        scenario: SCENARIO,
        metric: 'storm sweeps: BUILDING_SILENT raised',
        value: storm.alarms.get('BUILDING_SILENT') ?? 0,
        unit: 'alarms',
      },
      { scenario: SCENARIO, metric: 'storm sweeps: DEADMAN raised', value: storm.alarms.get('DEADMAN') ?? 0, unit: 'alarms' },
    ];
    return figures;
  },
};
