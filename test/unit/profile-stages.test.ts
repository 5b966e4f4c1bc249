import { describe, expect, it } from 'vitest';
import { formatStageTable, stageOfFrame, stageRows, stageTimes, type CpuProfile } from '../../bench/profile-stages.js';

const repo = 'file:///checkout';
const frame = (functionName: string, url = '') => ({ functionName, url, lineNumber: 0, columnNumber: 0 });

/**
 * (root) -> handleUpload (gateway/http) -> JSON.parse (builtin)
 *        -> observe (shared/detection)  -> search (rbush)
 *        -> flush (shared/positions)    -> send (pg)
 *        -> publish (shared/bus)        -> pack (msgpackr)
 *        -> sendFrame (gateway/ws)      -> send (native uWS, no url)
 *        -> processTicksAndRejections (node:internal) -> info (pino, not listed)
 *        -> (garbage collector), (idle), (program)
 */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 4, 6, 8, 10, 12, 14, 15, 16] },
    { id: 2, callFrame: frame('handleUpload', `${repo}/gateway/http/http-server.ts`), children: [3] },
    { id: 3, callFrame: frame('parse'), children: [] },
    { id: 4, callFrame: frame('observe', `${repo}/shared/detection/transition.detector.ts`), children: [5] },
    { id: 5, callFrame: frame('search', 'file:///main/node_modules/rbush/index.js') },
    { id: 6, callFrame: frame('flush', `${repo}/shared/positions/position-writer.ts`), children: [7] },
    { id: 7, callFrame: frame('send', 'file:///main/node_modules/pg/lib/connection.js') },
    { id: 8, callFrame: frame('publish', `${repo}/shared/bus/redis-bus.ts`), children: [9] },
    { id: 9, callFrame: frame('pack', 'file:///main/node_modules/msgpackr/pack.js') },
    { id: 10, callFrame: frame('sendFrame', `${repo}/gateway/ws/ws-connection.ts`), children: [11] },
    { id: 11, callFrame: frame('send') },
    { id: 12, callFrame: frame('processTicksAndRejections', 'node:internal/process/task_queues'), children: [13] },
    { id: 13, callFrame: frame('info', 'file:///main/node_modules/pino/lib/proto.js') },
    { id: 14, callFrame: frame('(garbage collector)') },
    { id: 15, callFrame: frame('(idle)') },
    { id: 16, callFrame: frame('(program)') },
  ],
  startTime: 1_000_000,
  endTime: 1_000_000 + 1300,
  // One sample per leaf, 100 µs apart; the first at +100 µs, each lasting until the next (the last until endTime).
  samples: [3, 5, 7, 9, 11, 13, 14, 15, 15, 16, 2, 4],
  timeDeltas: [100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100],
};

describe('profile stages', () => {
  it('names a frame by its source file, its package or its pseudo-frame, and leaves the rest to the caller', () => {
    expect(stageOfFrame(frame('validate', `${repo}/gateway/realtime/pose-schema.ts`))).toBe('http');
    expect(stageOfFrame(frame('georeference', `${repo}/gateway/realtime/building-registry.ts`))).toBe('pipeline');
    expect(stageOfFrame(frame('find', 'file:///main/node_modules/@mikro-orm/core/index.js'))).toBe('persistence');
    expect(stageOfFrame(frame('copyFrom', 'file:///main/node_modules/pg-copy-streams/copy-from.js'))).toBe('persistence');
    expect(stageOfFrame(frame('(garbage collector)'))).toBe('gc');
    expect(stageOfFrame(frame('parse'))).toBeUndefined();
    expect(stageOfFrame(frame('emit', 'node:events'))).toBeUndefined();
    expect(stageOfFrame(frame('info', 'file:///main/node_modules/pino/lib/proto.js'))).toBeUndefined();
  });

  it('sums self time per stage, unnamed frames counting toward their caller', () => {
    const times = stageTimes(profile);
    expect(times.totalUs).toBe(1200);
    expect(times.byStage).toEqual({
      http: 200,
      pipeline: 0,
      detection: 200,
      persistence: 100,
      bus: 100,
      ws: 100,
      gc: 100,
      native: 100,
      other: 100,
      idle: 200,
    });
    expect(times.top[0]).toMatchObject({ name: '(idle)', stage: 'idle', us: 200 });
    expect(times.top.find((entry) => entry.name.startsWith('send node_modules/pg/'))).toMatchObject({ stage: 'persistence', us: 100 });
  });

  it('keeps only the samples inside a window', () => {
    // Samples at +100 .. +1200 µs: the window [300, 700) holds those at 300, 400, 500 and 600 (pg, msgpackr, uWS send, pino).
    const times = stageTimes(profile, { fromUs: 300, toUs: 700 });
    expect(times.totalUs).toBe(400);
    expect(times.byStage).toMatchObject({ persistence: 100, bus: 100, ws: 100, other: 100, http: 0, idle: 0 });
  });

  it('divides each stage by the positions and the events of the run', () => {
    const rows = stageRows(stageTimes(profile), { positions: 4, events: 2 });
    expect(rows.find((row) => row.stage === 'detection')).toMatchObject({ us: 200, usPerPosition: 50, usPerEvent: 100 });
    expect(rows.find((row) => row.stage === 'idle')!.share).toBeCloseTo(200 / 1200);
    expect(Number.isNaN(stageRows(stageTimes(profile), { positions: 4, events: 0 })[0]!.usPerEvent)).toBe(true);
    const table = formatStageTable(stageTimes(profile), { positions: 4, events: 0 });
    expect(table).toMatch(/busy \(all but idle\)\s+83\.3%\s+250\.00\s+n\/a/);
  });

  it('scales the busy stages to CPU time, leaving idle and the sample shares alone', () => {
    const rows = stageRows(stageTimes(profile), { positions: 4, events: 2 }, 0.5);
    expect(rows.find((row) => row.stage === 'detection')).toMatchObject({ us: 100, usPerPosition: 25, usPerEvent: 50, share: 200 / 1200 });
    expect(rows.find((row) => row.stage === 'idle')).toMatchObject({ us: 200, usPerPosition: 50 });
    expect(formatStageTable(stageTimes(profile), { positions: 4, events: 2 }, 0.5)).toMatch(
      /busy \(all but idle\)\s+83\.3%\s+125\.00\s+250\.00/,
    );
  });
});
