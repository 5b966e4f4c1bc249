import { mkdirSync, writeFileSync } from 'node:fs';

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
  return percentile([...values].sort((a, b) => a - b), 50);
}

export function summarise(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? NaN, n: sorted.length };
}

const round = (value: number) => (Math.abs(value) >= 100 ? Math.round(value) : Math.round(value * 100) / 100);

/** Prints the figures as a table and writes them to bench/results/ (latest.json and a dated copy). */
export function report(figures: Figure[], environment: Record<string, unknown>): void {
  const rows = figures.map((f) => [f.scenario, f.metric, `${round(f.value)} ${f.unit}`, f.target ?? '', f.met === undefined ? '' : f.met ? 'yes' : 'NO']);
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
