import type fc from 'fast-check';
import { seededRuns } from '../../../testkit/seeded-runs.js';

/**
 * Defects the suite finds but stops generating input for until their fixes land, each named by what it breaks.
 * Only crashes belong here: a crash takes the whole test process down and hides every other finding. Delete an
 * entry once its fix is merged (`= {}` removes them all).
 */
export const KNOWN_DEFECTS: Record<string, string> = {};
/**
 * More names to leave out for one run, comma-separated, to look past a defect that hides others while exploring:
 * `FUZZ_SKIP=nul-to-postgres` stops generating NUL characters (a 500 from PostgreSQL while that fix is pending).
 */
const skipped = (process.env.FUZZ_SKIP ?? '').split(',').filter(Boolean);
export const isKnownDefect = (name: string): boolean => name in KNOWN_DEFECTS || skipped.includes(name);

const integer = (name: string, fallback: number): number => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got ${raw}`);
  return value;
};

/** The run's seed: fixed so CI is repeatable, FUZZ_SEED to try another or replay a failure. */
export const FUZZ_SEED = integer('FUZZ_SEED', 20_261_123);
/**
 * Generated requests per HTTP operation: 12 in `.ci/run`, 4 in `npm test`; the WebSocket property, one property for
 * all ops, plays ten times as many sockets.
 */
export const FUZZ_RUNS = integer('FUZZ_RUNS', seededRuns(12, 4));
/** Generated bodies per write in the round trip (each also gets one with every text at its maximum length): 6 in `.ci/run`, 2 in `npm test`. */
export const ROUND_TRIP_RUNS = integer('ROUND_TRIP_RUNS', seededRuns(6, 2));
/** Only operations whose `METHOD /path` contains this text (replaying one failure). */
export const FUZZ_ONLY = process.env.FUZZ_ONLY || undefined;
/** fast-check's replay path of a counterexample, printed with every failure: with FUZZ_SEED and FUZZ_ONLY, replays exactly that case. */
export const FUZZ_PATH = process.env.FUZZ_PATH || undefined;

/** The fuzzed gateway's log level: `error` prints the stack of each 5xx while replaying one. */
export const FUZZ_LOG_LEVEL = process.env.FUZZ_LOG_LEVEL || 'silent';

/** Parameters of one fc.check: the seed, the run count, and a cap so a shrink on a loaded machine cannot run away. */
export const checkParameters = (runs = FUZZ_RUNS): fc.Parameters<unknown> => ({
  seed: FUZZ_SEED,
  numRuns: runs,
  path: FUZZ_PATH,
  endOnFailure: false,
  interruptAfterTimeLimit: 20_000,
  markInterruptAsFailure: false,
});

/** One failed property, ready to print: what to run to replay it and the shrunk input. */
export function describeFailure(
  subject: string,
  details: fc.RunDetails<unknown>,
  render: (counterexample: unknown) => string,
  file: string,
): string {
  const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  return [
    `✗ ${subject} (after ${details.numRuns} runs, ${details.numShrinks} shrinks)`,
    `  replay: FUZZ_SEED=${details.seed} FUZZ_ONLY='${subject}' FUZZ_PATH='${details.counterexamplePath}' npx vitest run ${file}`,
    `  ${render((details.counterexample as unknown[] | null)?.[0])
      .split('\n')
      .join('\n  ')}`,
    `  ${error.split('\n').join('\n  ')}`,
  ].join('\n');
}

/** Shortens a long text for a failure message, saying how much was left out. */
export function clip(text: string, max = 600): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters in all)`;
}
