import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { PositionRecord } from '../shared/positions/position-record.js';
import { PositionStore } from '../shared/positions/position-store.js';
import type { Storage } from '../shared/storage/storage.js';
import { ServerStorage } from '../shared/storage/server-storage.js';
import { serverTemplate } from '../testkit/storage-template.js';
import { createScratchDatabase } from '../testkit/test-environment.js';
import { median, type Figure, type Scenario } from './harness.js';

const DEVICES = Number(process.env.BENCH_POSITIONS_DEVICES ?? 2000);
const ROWS = Number(process.env.BENCH_POSITIONS_ROWS ?? 200_000);
/** Rows per commit: 100 is one upload's batch committed alone, 1,000 a writer's batch under load. */
const BATCHES = (process.env.BENCH_POSITIONS_BATCHES ?? '100,1000').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_POSITIONS_ROUNDS ?? 3);
const DAY_MS = 86_400_000;

const BUILDING = 'create index on positions (organization_id, building_id, ts)';
const DEVICE = 'create index on positions (organization_id, device_id, ts)';
const RECEIVED_TS_BRIN = 'create index on positions using brin (received_at, ts)';

/**
 * The positions' indexes of each variant: every index of a freshly migrated database is dropped, then these are
 * created (undefined: as migrated). Columns and the COPY are the same in every variant: only the indexes differ.
 */
const VARIANTS: { name: string; indexes: string[] | undefined }[] = [
  { name: 'before (m0005 btrees, m0011 BRIN)', indexes: [BUILDING, DEVICE, 'create index on positions using brin (received_at)'] },
  { name: 'after (m0034, as migrated)', indexes: undefined },
  {
    name: 'm0011 BRIN and a second one on ts',
    indexes: [BUILDING, DEVICE, 'create index on positions using brin (received_at)', 'create index on positions using brin (ts)'],
  },
  { name: 'building btree without organization_id', indexes: ['create index on positions (building_id, ts)', DEVICE, RECEIVED_TS_BRIN] },
  { name: 'device btree without organization_id', indexes: [BUILDING, 'create index on positions (device_id, ts)', RECEIVED_TS_BRIN] },
  { name: 'no device btree', indexes: [BUILDING, RECEIVED_TS_BRIN] },
  { name: 'no index (floor: COPY, heap, commit)', indexes: [] },
];

/**
 * CPU of the bench database's backends from /proc/<pid>/schedstat (ns on the CPU, not /proc/<pid>/stat's 10 ms
 * ticks: a variant's run is a second or two of backend CPU). Backends are the same connections throughout.
 */
class BackendCpu {
  private constructor(
    private readonly storage: Storage,
    private readonly start: Map<number, number>,
  ) {}

  static async sample(storage: Storage): Promise<BackendCpu> {
    return new BackendCpu(storage, await BackendCpu.backends(storage));
  }

  private static async backends(storage: Storage): Promise<Map<number, number>> {
    const rows = await storage.execute<{ pid: number }>('select pid from pg_stat_activity where datname = current_database()');
    return new Map(rows.map((row) => [Number(row.pid), BackendCpu.ns(Number(row.pid))]));
  }

  private static ns(pid: number): number {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  }

  /** µs of CPU since the sample, over every backend there was then or is now. */
  async us(): Promise<number> {
    const now = await BackendCpu.backends(this.storage);
    let total = 0;
    for (const [pid, ns] of now) total += ns - (this.start.get(pid) ?? 0);
    return total / 1000;
  }
}

/**
 * BENCH_POSITIONS_INDEXES=before: the reports and csv-export scenarios put the positions' indexes back as they were
 * before m0034, on their fresh database before seeding, so their figures before and after compare in one sitting.
 */
export async function positionsIndexesForBench(storage: Storage): Promise<void> {
  if (process.env.BENCH_POSITIONS_INDEXES !== 'before') return;
  await replaceIndexes(storage, VARIANTS[0]!.indexes!);
}

async function replaceIndexes(storage: Storage, indexes: string[]): Promise<void> {
  const existing = await storage.execute<{ name: string }>(
    `select c.relname as name from pg_index i join pg_class c on c.oid = i.indexrelid where i.indrelid = 'positions'::regclass`,
  );
  for (const { name } of existing) await storage.execute(`drop index ${name}`);
  for (const statement of indexes) await storage.execute(statement);
}

/** 2,000 devices random-walking on a 200 m floor at 1 Hz, interleaved as the gateway receives them: one day's partition. */
function fleetRows(organizationId: string, day: number): PositionRecord[] {
  const rows: PositionRecord[] = [];
  const x = Float64Array.from({ length: DEVICES }, (_, d) => (d * 37) % 200);
  const y = Float64Array.from({ length: DEVICES }, (_, d) => (d * 91) % 200);
  let seed = 33;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  for (let i = 0; i < ROWS; i++) {
    const d = i % DEVICES;
    x[d] = Math.min(200, Math.max(0, x[d]! + random() * 2 - 1));
    y[d] = Math.min(200, Math.max(0, y[d]! + random() * 2 - 1));
    const timestamp = day + 3_600_000 + Math.floor(i / DEVICES) * 1000 + (d % 1000);
    rows.push({
      organizationId,
      deviceId: `device-${String(d).padStart(5, '0')}`,
      userId: null,
      buildingId: 1 + (d % 4),
      floorId: 1 + (d % 3),
      indoor: true,
      x: x[d]!,
      y: y[d]!,
      lat: 40.4168 + y[d]! * 1e-5,
      lng: -3.7038 + x[d]! * 1e-5,
      yaw: (i % 628) / 100,
      accuracy: 2,
      timestamp,
      receivedAt: timestamp + 20,
    });
  }
  return rows;
}

/** Backend CPU µs per stored row of one variant: a fresh database, then every row in `batch`-row commits (COPY). */
async function measureVariant(baseUrl: string, template: string, indexes: string[] | undefined, rows: PositionRecord[], batch: number) {
  const database = await createScratchDatabase(baseUrl, template);
  const storage = await ServerStorage.open(database.url);
  try {
    if (indexes) await replaceIndexes(storage, indexes);
    const store = new PositionStore(storage);
    await store.ensurePartitions(rows);
    // The writer pool's connections exist before the first sample, so every backend that copies is counted whole.
    await store.insert(rows.slice(0, 1));
    const cpu = await BackendCpu.sample(storage);
    for (let start = 1; start < rows.length; start += batch)
      await store.insert(rows.slice(start, start + batch), [], { createPartitions: false });
    return (await cpu.us()) / (rows.length - 1);
  } finally {
    await storage.close();
    await database.drop();
  }
}

/**
 * Backend CPU µs of a `begin` and a `commit` statement around nothing, on a writer connection: what a commit of
 * positions alone no longer pays since it is one COPY in its own transaction (the commit's own work, WAL flush
 * included, is paid either way).
 */
async function beginCommitPairUs(baseUrl: string, template: string, pairs = 2000): Promise<number> {
  const database = await createScratchDatabase(baseUrl, template);
  const storage = await ServerStorage.open(database.url);
  try {
    const client = await storage.writerPool.connect();
    try {
      await client.query('begin');
      await client.query('commit');
      const cpu = await BackendCpu.sample(storage);
      for (let i = 0; i < pairs; i++) {
        await client.query('begin');
        await client.query('commit');
      }
      return (await cpu.us()) / pairs;
    } finally {
      client.release();
    }
  } finally {
    await storage.close();
    await database.drop();
  }
}

/**
 * Issue 33: PostgreSQL backend CPU per stored position (from /proc/<pid>/schedstat of the bench database's backends:
 * the server must be local), each variant of the positions' indexes in a fresh database, rows stored through
 * PositionStore (binary COPY) in commits of each size of BENCH_POSITIONS_BATCHES, rounds interleaved so every
 * variant meets the same load; the median of the rounds is reported. "No index" is the floor: COPY, heap, commit.
 */
export const positionsWriteScenario: Scenario = {
  name: 'positions-write',
  async run(): Promise<Figure[]> {
    const baseUrl = process.env.DATABASE_URL;
    const log = (line: string) => process.stdout.write(`  ${line}\n`);
    if (!baseUrl) {
      log('positions-write needs DATABASE_URL (a local PostgreSQL server): skipped');
      return [];
    }
    const template = await serverTemplate(baseUrl);
    const rows = fleetRows(randomUUID(), Math.floor(Date.now() / DAY_MS) * DAY_MS - DAY_MS);
    const figures: Figure[] = [];
    for (const batch of BATCHES) {
      const samples = new Map<string, number[]>(VARIANTS.map((variant) => [variant.name, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const variant of VARIANTS) {
          const us = await measureVariant(baseUrl, template, variant.indexes, rows, batch);
          samples.get(variant.name)!.push(us);
          log(`batch ${batch}, round ${round + 1}: ${variant.name} ${us.toFixed(2)} µs/row`);
        }
      }
      const before = median(samples.get(VARIANTS[0]!.name)!);
      for (const variant of VARIANTS) {
        const us = median(samples.get(variant.name)!);
        const all = samples
          .get(variant.name)!
          .map((value) => value.toFixed(2))
          .join(' / ');
        log(`batch ${batch}: ${variant.name} median ${us.toFixed(2)} µs/row (${all}), ${(us / before).toFixed(2)}× before`);
        figures.push({
          scenario: 'positions-write',
          metric: `backend CPU per stored position, ${batch}-row commits, ${variant.name}`,
          value: us,
          unit: 'µs',
        });
      }
      const after = median(samples.get(VARIANTS[1]!.name)!);
      figures.push({
        scenario: 'positions-write',
        metric: `after / before, ${batch}-row commits`,
        value: after / before,
        unit: '×',
        target: '≤ 0.5',
        met: after / before <= 0.5,
      });
    }
    const pairs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) pairs.push(await beginCommitPairUs(baseUrl, template));
    const pairUs = median(pairs);
    log(
      `begin + commit around nothing: median ${pairUs.toFixed(1)} µs (${pairs.map((value) => value.toFixed(1)).join(' / ')}), saved per commit of positions alone`,
    );
    figures.push({
      scenario: 'positions-write',
      metric: 'begin + commit statements, saved per commit of positions alone',
      value: pairUs,
      unit: 'µs',
    });
    return figures;
  },
};
