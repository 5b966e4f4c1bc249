import { expect } from 'vitest';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Samples {
  samples: Sample[];
  /** Sum of the samples of `name` whose labels include `labels` (0 when none): a counter's value across children. */
  value(name: string, labels?: Record<string, string>): number;
  has(name: string): boolean;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/g;

/** The Prometheus text exposition format, strictly enough that a malformed line fails the test. */
export function parsePrometheus(text: string): Samples {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a Prometheus sample: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, raw] of (match[2] ?? '').matchAll(LABEL))
      labels[key!] = raw!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    // As Prometheus reads it (Go's ParseFloat): NaN and Inf in any case.
    const raw = match[3]!.toLowerCase();
    const value = raw === 'nan' ? NaN : raw === '+inf' || raw === 'inf' ? Infinity : raw === '-inf' ? -Infinity : Number(raw);
    if (Number.isNaN(value) && raw !== 'nan') throw new Error(`not a sample value: ${line}`);
    samples.push({ name: match[1]!, labels, value });
  }
  const matches = (sample: Sample, name: string, labels: Record<string, string>) =>
    sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value);
  return {
    samples,
    value: (name, labels = {}) =>
      samples.filter((sample) => matches(sample, name, labels)).reduce((total, sample) => total + sample.value, 0),
    has: (name) => samples.some((sample) => sample.name === name),
  };
}

/** GET /metrics with the token, parsed. */
export async function scrape(url: string, token?: string): Promise<Samples> {
  const response = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const text = await response.text();
  expect(response.status, text).toBe(200);
  return parsePrometheus(text);
}
