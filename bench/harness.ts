import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { busyUs, formatStageTable, stageRows, stageTimes, type CpuProfile } from './profile-stages.js';

/** One measured figure; `target` is the goal it is compared with (reported, never asserted). */
export interface Figure {
  scenario: string;
  metric: string;
  value: number;
  unit: string;
  target?: string;
  met?: boolean;
}

export interface Scenario {
  name: string;
  run(): Promise<Figure[]>;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}

/** The middle value (the lower middle of an even count), for figures taken as the median of a few runs. */
export function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/** Runs `run` `runs` times one after another; the median wall time in ms (one slow run is not the figure). */
export async function medianMs(runs: number, run: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await run();
    times.push(performance.now() - started);
  }
  return median(times);
}

export function summarise(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? NaN,
    n: sorted.length,
  };
}

const round = (value: number) => (Math.abs(value) >= 100 ? Math.round(value) : Math.round(value * 100) / 100);

/** Prints the figures as a table and writes them to bench/results/ (latest.json and a dated copy). */
export function report(figures: Figure[], environment: Record<string, unknown>): void {
  const rows = figures.map((f) => [
    f.scenario,
    f.metric,
    `${round(f.value)} ${f.unit}`,
    f.target ?? '',
    f.met === undefined ? '' : f.met ? 'yes' : 'NO',
  ]);
  const header = ['scenario', 'metric', 'value', 'target', 'met'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ');
  process.stdout.write(`${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n${rows.map(line).join('\n')}\n`);
  const directory = new URL('./results/', import.meta.url);
  mkdirSync(directory, { recursive: true });
  const payload = JSON.stringify({ at: new Date().toISOString(), environment, figures }, null, 2);
  writeFileSync(new URL('latest.json', directory), payload);
  writeFileSync(new URL(`${new Date().toISOString().replace(/[:.]/g, '-')}.json`, directory), payload);
  process.stdout.write(`\nwritten to bench/results/latest.json\n`);
}

/** A CPU profile of this process around one closed-loop run (see `startStageProfile`). */
export interface StageProfile {
  /**
   * Stops the profiler, writes the profile to bench/results/profiles/, prints the per-stage table and returns its
   * per-position rows as figures. `warmupMs` / `windowMs` place the generator's measured window after the run was started.
   */
  finish(run: { positions: number; events: number; warmupMs: number; windowMs: number }): Promise<Figure[]>;
}

/**
 * BENCH_PROFILE=1: samples the CPU of this process (the in-process gateway under test; the load generator is a
 * child) through the inspector, from now until `finish`, every BENCH_PROFILE_INTERVAL_US (500 µs). Undefined
 * otherwise, so a scenario's hook costs nothing. Call it right before the run whose window it measures.
 */
export async function startStageProfile(scenario: string, label: string): Promise<StageProfile | undefined> {
  if (process.env.BENCH_PROFILE !== '1') return undefined;
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: Number(process.env.BENCH_PROFILE_INTERVAL_US ?? 500) });
  await session.post('Profiler.start');
  const cpuAtStart = process.cpuUsage();
  return {
    async finish({ positions, events, warmupMs, windowMs }) {
      const { profile } = (await session.post('Profiler.stop')) as { profile: CpuProfile };
      const cpu = process.cpuUsage(cpuAtStart);
      session.disconnect();
      const directory = new URL('./results/profiles/', import.meta.url);
      mkdirSync(directory, { recursive: true });
      const file = `${scenario}-${label.replace(/[^A-Za-z0-9=]+/g, '-')}-${new Date().toISOString().replace(/[:.]/g, '-')}.cpuprofile`;
      writeFileSync(new URL(file, directory), JSON.stringify(profile));
      // The generator opens its connections before its warm-up starts: the window starts a few ms later than this.
      const times = stageTimes(profile, { fromUs: warmupMs * 1000, toUs: (warmupMs + windowMs) * 1000 });
      // Samples are wall time: scaled to the CPU this process used over the whole profile (all its threads).
      const cpuScale = (cpu.user + cpu.system) / busyUs(stageTimes(profile));
      const counts = { positions, events };
      process.stdout.write(
        `  CPU profile, ${label} (bench/results/profiles/${file}):\n${formatStageTable(times, counts, cpuScale).replace(/^/gm, '    ')}\n`,
      );
      // Per position only: a stage's µs per event is the same time over another count (printed in the table).
      return stageRows(times, counts, cpuScale).map(
        (row): Figure =>
          row.stage === 'idle'
            ? { scenario, metric: `${label}: idle share of the profile`, value: row.share * 100, unit: '%' }
            : { scenario, metric: `${label}: ${row.stage} CPU per position (profile)`, value: row.usPerPosition, unit: 'µs' },
      );
    },
  };
}
