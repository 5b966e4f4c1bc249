import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../shared/logger.js';
import { PositionStore } from '../shared/positions/position-store.js';
import type { PositionRecord } from '../shared/positions/position-record.js';
import { materializations } from '../shared/reports/materializations.js';
import { HOUR_MS, ReportMaterializer, setWatermark, watermark, type Materialization } from '../shared/reports/materializer.js';
import { openStorage, type Storage } from '../shared/storage/index.js';
import { pgArray } from '../shared/storage/pg-array.js';
import type { RunningGateway } from '../testkit/test-gateway.js';
import { median, type Figure } from './harness.js';

/**
 * BENCH_MATERIALIZER=1 (geofencing): the same closed-loop runs with the report materializer off and on, back to
 * back in one process, BENCH_MATERIALIZER_ALTERNATIONS (3) times, so issue 18's "ingest drops by no more than
 * 10% with stays and rollups on" is a ratio taken in one sitting. "On" is the worst case, the top of an hour:
 * `npm run workers` as a child process (with Redis the materializer runs there; REPORTS_MATERIALIZE_DUTY from
 * BENCH_MATERIALIZER_DUTIES, `1,0.5`: an on run for each), with a closed hour of the same fleet's positions
 * pending, big enough that it is still rebuilding when the timed window ends (each on run says whether it was).
 * The closed hour is the fleet's own positions of the first off runs, copied into the previous UTC hour
 * BENCH_MATERIALIZER_COPIES (8) times at shifted times; before each on run the watermark is put back before them,
 * so each on run rebuilds the same backlog; after it the worker is killed and its pass rolled back.
 *
 * The amortized cost: the materializer alone (in this process, no load) on backlogs, with the CPU of every
 * PostgreSQL backend of the bench database (from /proc: the server must be local) and of this process. On the
 * sparse backlog above (tens of positions per device-hour), one copy and all of them split it into a cost per
 * position and per device-hour; on a dense one (copies of up to a hundred devices' positions, as many as give each
 * device-hour BENCH_MATERIALIZER_DENSE_PER_HOUR positions, 3,600: one device at 1 Hz, as in steady state) it
 * gives the cost per position that steady state pays. Every position is materialised about once, so on a CPU-bound host the ingest rate falls by about
 * materialise / (ingest + materialise), spread over the hour instead of at its top, whatever the pacing.
 * BENCH_MATERIALIZER_PROFILE=1 writes a CPU profile of each calibration pass to bench/results/profiles/.
 */
export const MATERIALIZER_VARIANT = process.env.BENCH_MATERIALIZER === '1';
const ALTERNATIONS = Number(process.env.BENCH_MATERIALIZER_ALTERNATIONS ?? 3);
/** REPORTS_MATERIALIZE_DUTY of the on runs: each alternation runs off, then on at each of these. */
const DUTIES = (process.env.BENCH_MATERIALIZER_DUTIES ?? '1,0.5').split(',').map(Number);
/** Positions per device-hour of the dense calibration: an hour of one device at 1 Hz. */
const DENSE_PER_HOUR = Number(process.env.BENCH_MATERIALIZER_DENSE_PER_HOUR ?? 3600);
const COPIES = process.env.BENCH_MATERIALIZER_COPIES ? Number(process.env.BENCH_MATERIALIZER_COPIES) : undefined;
/** Pass interval of the bench's materializer: its first pass starts right after the on run starts. */
const INTERVAL_MS = 250;

export interface LoadRun {
  positionsPerSecond: number;
  acked: number;
  /** CPU seconds of every PostgreSQL backend of the bench database over the run. */
  dbCpuS: number;
  /** CPU seconds of this process (gateway, and in on runs the materializer) over the run. */
  processCpuS: number;
}

const ticks = 100;
const cpuOf = (pid: number): number => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / ticks;
  } catch {
    return 0; // the backend exited: its CPU since the last sample is lost (an undercount)
  }
};

/** CPU seconds of the backends of this database, counted from `start` (backends that appear later count from 0). */
export class DatabaseCpu {
  private constructor(
    private readonly storage: Storage,
    private readonly start: Map<number, number>,
  ) {}

  static async sample(storage: Storage): Promise<DatabaseCpu> {
    return new DatabaseCpu(storage, await DatabaseCpu.backends(storage));
  }

  private static async backends(storage: Storage): Promise<Map<number, number>> {
    const rows = await storage.execute<{ pid: number }>('select pid from pg_stat_activity where datname = current_database()');
    return new Map(rows.map((row) => [Number(row.pid), cpuOf(Number(row.pid))]));
  }

  async seconds(): Promise<number> {
    const now = await DatabaseCpu.backends(this.storage);
    let total = 0;
    for (const [pid, cpu] of now) total += cpu - (this.start.get(pid) ?? 0);
    for (const [pid, cpu] of this.start) if (!now.has(pid)) total += Math.max(0, cpuOf(pid) - cpu);
    return total;
  }
}

const processSeconds = () => {
  const cpu = process.cpuUsage();
  return (cpu.user + cpu.system) / 1e6;
};

/** Runs `run` and measures the database's and this process's CPU around it. */
export async function measured(storage: Storage, run: () => Promise<{ positionsPerSecond: number; acked: number }>): Promise<LoadRun> {
  const db = await DatabaseCpu.sample(storage);
  const before = processSeconds();
  const result = await run();
  return { ...result, dbCpuS: await db.seconds(), processCpuS: processSeconds() - before };
}

interface Protocol {
  label: string;
  run: () => Promise<{ positionsPerSecond: number; acked: number }>;
}

/**
 * Off / on pairs for each protocol, after the calibration; returns the figures (per pair and the spread).
 * `fences` labels them; `buildingId` scopes the copy to the bench's building.
 */
export async function materializerOnOff(
  running: RunningGateway,
  fences: number,
  _devices: number,
  buildingId: number,
  protocols: Protocol[],
  log: (line: string) => void,
): Promise<Omit<Figure, 'scenario'>[]> {
  const config = { ...running.environment.config, REPORTS_MATERIALIZE_INTERVAL_MS: INTERVAL_MS };
  const logger = createLogger('silent');
  // The materializer's own pool, as the worker process has; the bench reads CPU and copies rows through it too.
  const storage = await openStorage(config, logger);
  const figures: Omit<Figure, 'scenario'>[] = [];
  const pairs = new Map<string, { off: LoadRun; on: LoadRun; busy: boolean }[]>(
    protocols.flatMap((p) => DUTIES.map((duty) => [`${p.label}\u0000${duty}`, []])),
  );
  try {
    const [org] = await storage.execute<{ organization_id: string }>('select organization_id from buildings where id = ?', [buildingId]);
    const organizationId = org!.organization_id;
    const offRun = (protocol: Protocol) => measured(storage, protocol.run);
    const onRun = async (protocol: Protocol, from: number, duty: number) => {
      await setWatermark(storage, new Date(from));
      const worker = await startWorkerProcess({
        ...running.environment.env,
        REPORTS_MATERIALIZE_INTERVAL_MS: String(INTERVAL_MS),
        REPORTS_MATERIALIZE_DUTY: String(duty),
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      });
      const cpuBefore = cpuOf(worker.pid);
      const run = await measured(storage, protocol.run);
      const workerCpuS = cpuOf(worker.pid) - cpuBefore;
      // Still rebuilding the backlog when the window closed: the watermark has not moved past it yet.
      const busy =
        (
          await storage.execute<{ ms: string }>(
            `select (extract(epoch from watermark) * 1000)::int8 as ms from report_watermarks where name = 'reports'`,
          )
        )[0]!.ms === String(from);
      await worker.kill();
      // Its pass dies with it: end the backend still running its statement (it holds the advisory lock).
      await storage.execute(
        `select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`,
      );
      log(
        `  materializer ${busy ? 'was still rebuilding at the end of the window' : 'had FINISHED its backlog before the window ended'}; worker process CPU ${workerCpuS.toFixed(1)} s`,
      );
      return { run, busy };
    };
    // Alternation 1's off runs give the fleet's positions the backlog is made of.
    const firstOff = new Map<string, LoadRun>();
    const offStarted = Date.now();
    for (const protocol of protocols) firstOff.set(protocol.label, await offRun(protocol));
    const backlog = await seedBacklog(
      storage,
      organizationId,
      buildingId,
      offStarted,
      running.environment.config.REPORTS_MATERIALIZE_LAG_MS,
      log,
    );
    // Calibration, the materializer alone: on one copy, then on all of them. The difference is the cost of a
    // position; the rest of the first is the cost of a device-hour (its share of a batch's statements and grid).
    const lagMs = running.environment.config.REPORTS_MATERIALIZE_LAG_MS;
    const one = await calibrate(storage, backlog.from, backlog.rowsPerCopy, lagMs, log);
    const copies = COPIES ?? 8;
    if (copies > 1) await backlog.copy(1, copies);
    const all = await calibrate(storage, backlog.from, backlog.rowsPerCopy * copies, lagMs, log);
    const marginal = (key: 'dbCpuS' | 'processCpuS' | 'wallS') => Math.max(0, (all[key] - one[key]) / (all.rows - one.rows));
    const perRow = { db: marginal('dbCpuS'), process: marginal('processCpuS'), wall: marginal('wallS') };
    const perUnit = (key: 'dbCpuS' | 'processCpuS', row: number) => Math.max(0, (one[key] - row * one.rows) / backlog.deviceHours);
    const perDeviceHour = { db: perUnit('dbCpuS', perRow.db), process: perUnit('processCpuS', perRow.process) };
    log(`backlog: ${copies} copies of ${backlog.rowsPerCopy} positions in ${backlog.deviceHours} device-hours of the hour before`);
    for (let i = 0; i < ALTERNATIONS; i++) {
      for (const protocol of protocols) {
        const off = i === 0 ? firstOff.get(protocol.label)! : await offRun(protocol);
        for (const duty of DUTIES) {
          const { run: on, busy } = await onRun(protocol, backlog.from, duty);
          pairs.get(`${protocol.label}\u0000${duty}`)!.push({ off, on, busy });
          log(
            `${protocol.label} #${i + 1}: off ${off.positionsPerSecond.toFixed(0)} pos/s, on (duty ${duty}) ${on.positionsPerSecond.toFixed(0)} pos/s, on/off ${(on.positionsPerSecond / off.positionsPerSecond).toFixed(3)}`,
          );
        }
      }
    }
    // Steady state: a device-hour holds an hour of one device's positions, thousands, not the backlog's tens. The
    // cost per position at that density: copies of a hundred HTTP devices' positions, two hours back, as many as
    // make DENSE_PER_HOUR positions per device-hour (at 400 copies of ten devices, as before, they were 213,000).
    const dense = await seedBacklog(storage, organizationId, buildingId, offStarted, lagMs, log, 2, 'h-00%');
    const denseCopies = Math.max(1, Math.round(DENSE_PER_HOUR / (dense.rowsPerCopy / dense.deviceHours)));
    if (denseCopies > 1) await dense.copy(1, denseCopies);
    const denseAlone = await calibrate(storage, dense.from, dense.rowsPerCopy * denseCopies, lagMs, log);
    const materialise = (run: { dbCpuS: number; processCpuS: number; rows: number }) => ((run.dbCpuS + run.processCpuS) / run.rows) * 1e6;
    const densePerRow = materialise(denseAlone) / 1e6;
    // Which materialization costs what: each alone on the same dense backlog.
    for (const single of materializations) {
      const each = await calibrate(storage, dense.from, denseAlone.rows, lagMs, log, [single]);
      figures.push({
        metric: `F=${fences}: materializer alone, ${single.name} only, DB + process CPU per materialised position (DB ${((each.dbCpuS / each.rows) * 1e6).toFixed(1)} µs), dense`,
        value: materialise(each),
        unit: 'µs',
      });
    }
    // Figures: the on/off spread per protocol, DB CPU per position off and on, the amortized cost.
    for (const protocol of protocols) {
      for (const duty of DUTIES) {
        const list = pairs.get(`${protocol.label}\u0000${duty}`)!;
        const ratios = list.map((pair) => pair.on.positionsPerSecond / pair.off.positionsPerSecond);
        if (ratios.length === 0) continue;
        const sorted = [...ratios].sort((a, b) => a - b);
        const onDb = median(list.map((p) => (p.on.dbCpuS * 1e6) / p.on.acked));
        figures.push({
          metric: `F=${fences} ${protocol.label}: ingest on/off, materializer (duty ${duty}) rebuilding a closed hour (median of ${ratios.length} pairs; min ${sorted[0]!.toFixed(3)}, max ${sorted[sorted.length - 1]!.toFixed(3)}; busy through the window in ${list.filter((p) => p.busy).length}/${list.length})`,
          value: median(ratios),
          unit: 'x',
          target: '>= 0.90',
          met: median(ratios) >= 0.9,
        });
        figures.push({
          metric: `F=${fences} ${protocol.label}: DB CPU per ingested position, materializer on (duty ${duty}; includes the materializer's, median)`,
          value: onDb,
          unit: 'µs',
        });
      }
      const list = pairs.get(`${protocol.label}\u0000${DUTIES[0]}`)!;
      if (list.length === 0) continue;
      const offDb = median(list.map((p) => (p.off.dbCpuS * 1e6) / p.off.acked));
      const offProcess = median(list.map((p) => (p.off.processCpuS * 1e6) / p.off.acked));
      figures.push({
        metric: `F=${fences} ${protocol.label}: DB CPU per ingested position, materializer off (median)`,
        value: offDb,
        unit: 'µs',
      });
      figures.push({
        metric: `F=${fences} ${protocol.label}: gateway process CPU per ingested position, materializer off (median)`,
        value: offProcess,
        unit: 'µs',
      });
      // Steady state: every position is materialised once, at about the dense calibration's cost.
      const materialiseUs = densePerRow * 1e6;
      figures.push({
        metric: `F=${fences} ${protocol.label}: amortized steady state, materialise / (ingest + materialise) CPU per position`,
        value: (100 * materialiseUs) / (offDb + offProcess + materialiseUs),
        unit: '%',
        target: '<= 10%',
        met: materialiseUs / (offDb + offProcess + materialiseUs) <= 0.1,
      });
    }
    figures.push({
      metric: `F=${fences}: materializer alone, DB + process CPU per materialised position, ${(denseAlone.rows / dense.deviceHours).toFixed(0)} positions per device-hour`,
      value: materialise(denseAlone),
      unit: 'µs',
    });
    figures.push({
      metric: `F=${fences}: materializer alone, DB CPU per materialised position, dense`,
      value: (denseAlone.dbCpuS / denseAlone.rows) * 1e6,
      unit: 'µs',
    });
    figures.push({
      metric: `F=${fences}: materializer alone, DB CPU per materialised position (marginal)`,
      value: perRow.db * 1e6,
      unit: 'µs',
    });
    figures.push({
      metric: `F=${fences}: materializer alone, its process CPU per materialised position (marginal)`,
      value: perRow.process * 1e6,
      unit: 'µs',
    });
    figures.push({
      metric: `F=${fences}: materializer alone, DB + process CPU per device-hour (fixed)`,
      value: (perDeviceHour.db + perDeviceHour.process) * 1e3,
      unit: 'ms',
    });
    figures.push({
      metric: `F=${fences}: materializer alone, wall per materialised position (marginal; busy machine)`,
      value: perRow.wall * 1e6,
      unit: 'µs',
    });
    return figures;
  } finally {
    await storage.close();
  }
}

/** The `received_at` of every seeded copy: the copies are never copied again. */
const SEEDED: number[] = [];

/**
 * The fleet's positions received since `since` (the off runs), copied `hoursBack` UTC hours back (devices matching
 * `devices`, a LIKE pattern) with one new `received_at`, behind now by twice the lag, so a pass whose watermark
 * is put back to just before it rebuilds them as late positions of a closed hour. Copy k shifts by k × 37 s
 * within the hour (so device-hours fill up); `copy(from, to)` adds copies [from, to) in one statement.
 */
async function seedBacklog(
  storage: Storage,
  organizationId: string,
  buildingId: number,
  since: number,
  lagMs: number,
  log: (line: string) => void,
  hoursBack = 1,
  devices = '%',
) {
  const hour = Math.floor(since / HOUR_MS) * HOUR_MS;
  const target = hour - hoursBack * HOUR_MS;
  await new PositionStore(storage).ensurePartitions([{ timestamp: target } as PositionRecord]);
  const receivedAt = Date.now() - 2 * lagMs;
  SEEDED.push(receivedAt);
  const copy = async (from: number, to: number) => {
    await storage.execute(
      `insert into positions (organization_id, device_id, user_id, building_id, floor_id, indoor, x, y, lat, lng, yaw, accuracy, ts, received_at)
       select organization_id, device_id, user_id, building_id, floor_id, indoor, x, y, lat, lng, yaw, accuracy,
              ?::timestamptz + make_interval(secs => mod(mod(extract(epoch from ts - ?::timestamptz) + k * 37, 3600) + 3600, 3600)), ?::timestamptz
       from positions cross join generate_series(?::int, ?::int) as k
       where organization_id = ? and building_id = ? and device_id like ? and ts >= ?::timestamptz and ts < ?::timestamptz and received_at >= ?::timestamptz and received_at <> all(?::timestamptz[])`,
      [
        new Date(target).toISOString(),
        new Date(hour).toISOString(),
        new Date(receivedAt).toISOString(),
        from,
        to - 1,
        organizationId,
        buildingId,
        devices,
        new Date(since - 60_000).toISOString(),
        new Date(hour + HOUR_MS).toISOString(),
        new Date(since).toISOString(),
        pgArray(SEEDED.map((ms) => new Date(ms).toISOString())),
      ],
    );
  };
  const started = performance.now();
  await copy(0, 1);
  const [count] = await storage.execute<{ n: string; units: string }>(
    `select count(*) as n, count(distinct device_id) as units from positions where organization_id = ? and received_at = ?::timestamptz`,
    [organizationId, new Date(receivedAt).toISOString()],
  );
  log(`closed hour seeded: ${count!.n} positions of ${count!.units} devices in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return { from: receivedAt - 1, rowsPerCopy: Number(count!.n), deviceHours: Number(count!.units), copy };
}

/** The materializer alone (no load): one pass over the backlog, its wall time and CPU per position. */
async function calibrate(
  storage: Storage,
  from: number,
  rows: number,
  lagMs: number,
  log: (line: string) => void,
  which: readonly Materialization[] = materializations,
) {
  await setWatermark(storage, new Date(from));
  const materializer = new ReportMaterializer(storage, which, createLogger('silent'), { lagMs });
  const db = await DatabaseCpu.sample(storage);
  const before = processSeconds();
  const started = performance.now();
  const profile = process.env.BENCH_MATERIALIZER_PROFILE === '1' ? new Session() : undefined;
  if (profile) {
    profile.connect();
    await profile.post('Profiler.enable');
    await profile.post('Profiler.start');
  }
  await materializer.runOnce();
  if (profile) {
    const { profile: cpuProfile } = await profile.post('Profiler.stop');
    profile.disconnect();
    const directory = new URL('./results/profiles/', import.meta.url);
    mkdirSync(directory, { recursive: true });
    writeFileSync(
      new URL(`materializer-alone-${new Date().toISOString().replace(/[:.]/g, '-')}.cpuprofile`, directory),
      JSON.stringify(cpuProfile),
    );
  }
  const wallS = (performance.now() - started) / 1000;
  const result = { rows, wallS, dbCpuS: await db.seconds(), processCpuS: processSeconds() - before };
  if (!((await watermark((query) => storage.execute(query.text, query.params))) > from))
    throw new Error('the calibration pass did not move the watermark');
  log(
    `materializer alone (${which.map((m) => m.name).join(', ')}): ${rows} positions in ${wallS.toFixed(1)} s, DB CPU ${result.dbCpuS.toFixed(1)} s, process CPU ${result.processCpuS.toFixed(1)} s`,
  );
  return result;
}

/**
 * `npm run workers` as a child process (it runs the materializer when Redis is configured), ready once it logs
 * "worker ready"; `kill` is SIGKILL (an unfinished pass rolls back), by pid.
 */
async function startWorkerProcess(env: Record<string, string>): Promise<{ pid: number; kill: () => Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4000);
      if (output.includes('worker ready')) resolve();
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    void exited.then(() => reject(new Error(`the worker process exited while starting: ${output}`)));
  });
  return {
    pid: child.pid!,
    kill: async () => {
      process.off('exit', killOnExit);
      child.kill('SIGKILL');
      await exited;
    },
  };
}
