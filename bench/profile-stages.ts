/**
 * Per-stage CPU from a V8 CPU profile (what `node --cpu-prof` writes and the inspector's `Profiler.stop`
 * returns): self time per profile node, each node put in one stage of the hot path by the source file or
 * package of its innermost frame the stage table names, then divided by the positions and the enter/exit
 * events of the run. Pure: no I/O, no clock.
 *
 * Attribution: a frame the table does not name (node internals, builtins such as JSON.parse, native calls
 * such as uWS `send`, packages not listed, anonymous wrappers) counts toward its caller's stage, so the cost
 * of a builtin lands in the stage that called it. The profiler's pseudo-frames name themselves: garbage
 * collection, idle (the event loop waiting) and `(program)` (native code outside any JS frame: uWS parsing
 * and socket writes, libuv).
 *
 * A sample lasts from one tick to the next in wall time: on a busy machine, time the thread spent descheduled
 * inside a function counts as that function's. `cpuScale` (the process's CPU time over the busy sample time,
 * both over the whole profile) turns the busy stages into CPU time, assuming descheduling hits every stage alike.
 */

export interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber?: number; columnNumber?: number };
  children?: number[];
}

/** The fields of a `.cpuprofile` this module reads; times in microseconds. */
export interface CpuProfile {
  nodes: CpuProfileNode[];
  startTime: number;
  endTime: number;
  /** Node id of each sample, in time order. */
  samples: number[];
  /** Microseconds from the previous sample (the first: from `startTime`). */
  timeDeltas: number[];
}

export type Stage = 'http' | 'pipeline' | 'detection' | 'persistence' | 'bus' | 'ws' | 'gc' | 'native' | 'other' | 'idle';

/** Stages in print order, each with the one line that says what it holds. */
export const STAGES: readonly { stage: Stage; label: string }[] = [
  { stage: 'http', label: 'http parse/validate (gateway/http, routes, auth, pose-schema, zod, jose)' },
  { stage: 'pipeline', label: 'pipeline, georeference, devices (gateway/pipeline, gateway/realtime, shared/geo)' },
  { stage: 'detection', label: 'detection (shared/detection, gateway/detection, rbush)' },
  { stage: 'persistence', label: 'persistence (shared/positions, shared/storage, pg*, mikro-orm, knex)' },
  { stage: 'bus', label: 'bus (shared/bus, msgpackr, ioredis)' },
  { stage: 'ws', label: 'ws frames (gateway/ws, uWS send)' },
  { stage: 'gc', label: 'garbage collector' },
  { stage: 'native', label: 'native, outside JS: (program) (uWS I/O, libuv)' },
  { stage: 'other', label: 'other (timers, jobs, logging, metrics, bench)' },
  { stage: 'idle', label: 'idle (event loop waiting)' },
];

/** Repository sources (matched on the URL, outside node_modules), first match wins. */
const SOURCE_RULES: readonly [RegExp, Stage][] = [
  [/\/gateway\/(http|routes|auth)\//, 'http'],
  [/\/gateway\/realtime\/pose-schema\.ts$/, 'http'],
  [/\/gateway\/(pipeline|realtime)\//, 'pipeline'],
  [/\/shared\/geo\//, 'pipeline'],
  [/\/(shared|gateway)\/detection\//, 'detection'],
  [/\/shared\/(positions|storage)\//, 'persistence'],
  [/\/shared\/bus\//, 'bus'],
  [/\/gateway\/ws\//, 'ws'],
];

/** Packages by name (a scope stands for all its packages). */
const PACKAGE_RULES: Readonly<Record<string, Stage>> = {
  zod: 'http',
  jose: 'http',
  rbush: 'detection',
  quickselect: 'detection',
  pg: 'persistence',
  'pg-protocol': 'persistence',
  'pg-types': 'persistence',
  'pg-pool': 'persistence',
  'pg-copy-streams': 'persistence',
  'postgres-array': 'persistence',
  'postgres-date': 'persistence',
  '@mikro-orm': 'persistence',
  'mikro-orm-pglite': 'persistence',
  '@electric-sql': 'persistence',
  knex: 'persistence',
  tarn: 'persistence',
  msgpackr: 'bus',
  ioredis: 'bus',
  '@ioredis': 'bus',
  'redis-parser': 'bus',
  denque: 'bus',
  'cluster-key-slot': 'bus',
};

const PSEUDO_FRAMES: Readonly<Record<string, Stage>> = {
  '(garbage collector)': 'gc',
  '(idle)': 'idle',
  '(program)': 'native',
  '(root)': 'other',
};

/** The stage a frame names by itself, or undefined when it counts toward its caller's. */
export function stageOfFrame(callFrame: CpuProfileNode['callFrame']): Stage | undefined {
  const pseudo = PSEUDO_FRAMES[callFrame.functionName];
  if (pseudo && callFrame.url === '') return pseudo;
  const url = callFrame.url;
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const [first, second] = url.slice(modules + '/node_modules/'.length).split('/');
    return PACKAGE_RULES[first!] ?? (second === undefined ? undefined : PACKAGE_RULES[`${first}/${second}`]);
  }
  if (!url.startsWith('file:')) return undefined;
  return SOURCE_RULES.find(([pattern]) => pattern.test(url))?.[1];
}

export interface StageTimes {
  /** Self microseconds per stage, within the window. */
  byStage: Record<Stage, number>;
  totalUs: number;
  /** The functions with the most self time, with their stage, for what the table hides. */
  top: { name: string; stage: Stage; us: number }[];
}

/**
 * Self time per stage. A sample lasts until the next one (as DevTools counts it; the last one until
 * `endTime`). `window` keeps the samples taken from `fromUs` to `toUs` after the profile's start.
 */
export function stageTimes(profile: CpuProfile, window?: { fromUs: number; toUs: number }, topCount = 12): StageTimes {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const stageCache = new Map<number, Stage>();
  const stageOf = (id: number): Stage => {
    const path: number[] = [];
    let stage: Stage | undefined;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      stage = stageCache.get(at) ?? stageOfFrame(byId.get(at)!.callFrame);
      if (stage) break;
      path.push(at);
    }
    for (const at of path) stageCache.set(at, stage ?? 'other');
    return stage ?? 'other';
  };

  const selfUs = new Map<number, number>();
  let at = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i]!;
    const next = i + 1 < profile.samples.length ? at + profile.timeDeltas[i + 1]! : profile.endTime - profile.startTime;
    if (window && (at < window.fromUs || at >= window.toUs)) continue;
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, next - at));
  }

  const byStage = Object.fromEntries(STAGES.map(({ stage }) => [stage, 0])) as Record<Stage, number>;
  const byFunction = new Map<string, { stage: Stage; us: number }>();
  let totalUs = 0;
  for (const [id, us] of selfUs) {
    const stage = stageOf(id);
    byStage[stage] += us;
    totalUs += us;
    // No line numbers: tsx-compiled sources report line 0 for every function.
    const { functionName, url } = byId.get(id)!.callFrame;
    const name = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(node_modules|gateway|shared|bench|workers)\//, '$1/')}`.trim();
    const entry = byFunction.get(name) ?? { stage, us: 0 };
    entry.us += us;
    byFunction.set(name, entry);
  }
  const top = [...byFunction]
    .map(([name, { stage, us }]) => ({ name, stage, us }))
    .sort((a, b) => b.us - a.us)
    .slice(0, topCount);
  return { byStage, totalUs, top };
}

export interface StageRow {
  stage: Stage;
  label: string;
  us: number;
  /** Share of the whole profile (idle included). */
  share: number;
  usPerPosition: number;
  /** NaN when the run had no events. */
  usPerEvent: number;
}

/** Busy (all but idle) sample time: what `cpuScale` divides the process's CPU time by. */
export const busyUs = (times: StageTimes) => times.totalUs - times.byStage.idle;

/**
 * The stage times per position and per event of the run (NaN per event when there were none), busy stages
 * multiplied by `cpuScale`; `share` stays the share of the samples.
 */
export function stageRows(times: StageTimes, counts: { positions: number; events: number }, cpuScale = 1): StageRow[] {
  return STAGES.map(({ stage, label }) => {
    const us = times.byStage[stage] * (stage === 'idle' ? 1 : cpuScale);
    return {
      stage,
      label,
      us,
      share: times.totalUs > 0 ? times.byStage[stage] / times.totalUs : NaN,
      usPerPosition: counts.positions > 0 ? us / counts.positions : NaN,
      usPerEvent: counts.events > 0 ? us / counts.events : NaN,
    };
  });
}

const cell = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');

/** A plain-text table: one row per stage, a busy (all but idle) total, and the top functions. */
export function formatStageTable(times: StageTimes, counts: { positions: number; events: number }, cpuScale = 1): string {
  const rows = stageRows(times, counts, cpuScale);
  const busy = rows.filter((row) => row.stage !== 'idle').reduce((sum, row) => sum + row.us, 0);
  const lines = rows.map((row) => [row.label, `${cell(row.share * 100, 1)}%`, cell(row.usPerPosition, 2), cell(row.usPerEvent, 2)]);
  lines.push([
    'busy (all but idle)',
    `${cell((busyUs(times) / times.totalUs) * 100, 1)}%`,
    cell(busy / counts.positions, 2),
    cell(counts.events > 0 ? busy / counts.events : NaN, 2),
  ]);
  const header = ['stage', 'share', 'µs/position', 'µs/event'];
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => line[i]!.length)));
  const format = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const top = times.top.map(
    (entry) => `  ${cell((entry.us / times.totalUs) * 100, 1).padStart(5)}%  ${entry.stage.padEnd(11)} ${entry.name}`,
  );
  return [
    `${(times.totalUs / 1000).toFixed(0)} ms profiled, ${counts.positions} positions, ${counts.events} enter/exit events; busy stages in CPU time (x${cpuScale.toFixed(2)} of sample time)`,
    format(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...lines.map(format),
    'top self time:',
    ...top,
  ].join('\n');
}
