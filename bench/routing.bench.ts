import { describeRoute } from '../shared/routing/directions.js';
import { PathGraph, type GraphLink, type GraphNode } from '../shared/routing/path-graph.js';
import { summarise, type Figure, type Scenario } from './harness.js';
import { seededRandom } from './load-generator.js';

const SCENARIO = 'routing';
const FLOORS = 5;
/** A grid of COLUMNS x ROWS nodes per floor: 5 x 2,000 = 10,000 nodes. */
const COLUMNS = 50;
const ROWS = 40;
const PITCH_M = 4;
const ROUTES = Number(process.env.BENCH_ROUTES ?? 5000);

/**
 * A 10,000-node, five-floor navigation graph: a 50 x 40 grid of corridors per floor (4 m pitch, a tenth of the
 * links one-way, a tenth missing), stairs at every tenth node and lifts at four corners between consecutive
 * floors. Seeded, so every run routes the same pairs.
 */
export function benchGraph(seed = 19): { graph: PathGraph; nodes: GraphNode[] } {
  const random = seededRandom(seed);
  const nodes: GraphNode[] = [];
  const links: GraphLink[] = [];
  const id = (floor: number, column: number, row: number) => floor * COLUMNS * ROWS + row * COLUMNS + column;
  const link = (source: number, target: number, extra: Partial<GraphLink> = {}) =>
    links.push({ source, target, origin: 'both', accessible: true, tags: [], ...extra });
  for (let floor = 0; floor < FLOORS; floor++) {
    for (let row = 0; row < ROWS; row++) {
      for (let column = 0; column < COLUMNS; column++) {
        nodes.push({ id: id(floor, column, row), floor_id: floor + 1, x: column * PITCH_M, y: row * PITCH_M });
        for (const [dc, dr] of [
          [1, 0],
          [0, 1],
        ] as const) {
          if (column + dc >= COLUMNS || row + dr >= ROWS) continue;
          const draw = random();
          if (draw < 0.1) continue;
          link(id(floor, column, row), id(floor, column + dc, row + dr), draw < 0.2 ? { origin: draw < 0.15 ? 'source' : 'target' } : {});
        }
        if (floor + 1 < FLOORS && (row * COLUMNS + column) % 10 === 3)
          link(id(floor, column, row), id(floor + 1, column, row), { accessible: false, tags: ['stairs'] });
      }
    }
    if (floor + 1 < FLOORS) {
      for (const [column, row] of [
        [0, 0],
        [COLUMNS - 1, 0],
        [0, ROWS - 1],
        [COLUMNS - 1, ROWS - 1],
      ] as const)
        link(id(floor, column, row), id(floor + 1, column, row), { tags: ['lift'] });
    }
  }
  const floors = new Map(Array.from({ length: FLOORS }, (_, level) => [level + 1, { level, levelHeight: level * 4 }] as const));
  return { graph: new PathGraph(nodes, links, floors), nodes };
}

/** Issue 19: route latency on a 10,000-node multi-floor graph (snap both ends, A*, legs and steps). */
export const routingScenario: Scenario = {
  name: SCENARIO,
  async run(): Promise<Figure[]> {
    const built = performance.now();
    const { graph } = benchGraph();
    const buildMs = performance.now() - built;
    const random = seededRandom(7);
    const point = () => ({
      floor: 1 + Math.floor(random() * FLOORS),
      x: random() * (COLUMNS - 1) * PITCH_M,
      y: random() * (ROWS - 1) * PITCH_M,
    });
    const run = (accessibleOnly: boolean) => {
      const samples: number[] = [];
      let unreachable = 0;
      for (let i = 0; i < ROUTES; i++) {
        const a = point();
        const b = point();
        const started = performance.now();
        const from = graph.snap(a.floor, a.x, a.y, { accessibleOnly });
        const to = graph.snap(b.floor, b.x, b.y, { accessibleOnly });
        const found = from && to ? graph.route(from, to, { accessibleOnly }) : undefined;
        if (found) describeRoute(found, graph, (floorId) => `floor ${floorId}`);
        else unreachable++;
        samples.push(performance.now() - started);
      }
      return { ...summarise(samples.slice(Math.min(200, ROUTES / 10))), unreachable };
    };
    run(false); // warm-up: the JIT, not the figures
    const any = run(false);
    const accessible = run(true);
    process.stdout.write(
      `  graph of ${graph.nodeCount.toLocaleString('en-US')} nodes, ${graph.linkCount.toLocaleString('en-US')} links built in ${buildMs.toFixed(0)} ms\n`,
    );
    process.stdout.write(
      `  any links: p50 ${any.p50.toFixed(2)} p99 ${any.p99.toFixed(2)} max ${any.max.toFixed(2)} ms (${any.unreachable} unreachable); accessible only: p50 ${accessible.p50.toFixed(2)} p99 ${accessible.p99.toFixed(2)} ms\n`,
    );
    return [
      {
        scenario: SCENARIO,
        metric: `graph build (${graph.nodeCount} nodes, ${graph.linkCount} links, ${FLOORS} floors)`,
        value: buildMs,
        unit: 'ms',
      },
      { scenario: SCENARIO, metric: 'route p50 (snap + A* + steps), random pairs', value: any.p50, unit: 'ms' },
      {
        scenario: SCENARIO,
        metric: 'route p99 (snap + A* + steps), random pairs',
        value: any.p99,
        unit: 'ms',
        target: '< 5 ms',
        met: any.p99 < 5,
      },
      {
        scenario: SCENARIO,
        metric: 'route p99, accessible links only (lifts)',
        value: accessible.p99,
        unit: 'ms',
        target: '< 5 ms',
        met: accessible.p99 < 5,
      },
    ];
  },
};
