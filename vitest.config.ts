import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { driverIndependentFiles } from './test/driver-independent.js';

// Two projects: `quick` is what `npm test` runs (unit, integration, contract, fuzz, browser); `slow` holds the
// suites that kill and restart processes and servers (fault injection, multi-gateway clusters, a gateway restarted on
// its own storage) and the end-to-end
// files that spawn the gateway, the demo, the worker or the CLI as processes, each of which pays a cold start
// (`npm test` kept under about 5 minutes on a 2-core machine: docs/testing.md). `.ci/run` runs both
// (`npm run test:all`); `npm run test:slow` runs the slow ones alone.
const SLOW = [
  'test/fault/**/*.test.ts',
  'test/cluster/**/*.test.ts',
  'test/integration/admin-cli.test.ts',
  'test/integration/docs.test.ts',
  'test/integration/process.test.ts',
  'test/integration/process-data-dir.test.ts',
  'test/integration/process-demo-key.test.ts',
  'test/integration/process-one-host.test.ts',
  // A gateway stopped and started again on the same storage (downtime, rebuild, dead letters across a restart).
  'test/integration/deadman-downtime.test.ts',
  'test/integration/detector-rebuild.test.ts',
  'test/integration/dead-letter-restart.test.ts',
];

// `.ci/run`'s second pass, on PostgreSQL + Redis, sets FLOORCAST_SERVER_PASS=1: it skips the files that run the
// same on any drivers (test/driver-independent.ts), which the embedded pass has just run.
const SKIPPED = process.env.FLOORCAST_SERVER_PASS === '1' ? driverIndependentFiles(fileURLToPath(new URL('.', import.meta.url))) : [];

export default defineConfig({
  test: {
    // Each integration test boots a real gateway with its own database: give them room on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    // .ci/run asks for a JSON summary too, to print the plain "N passed, N failed" line CI reads.
    reporters: process.env.VITEST_JSON_SUMMARY ? ['default', ['json', { outputFile: process.env.VITEST_JSON_SUMMARY }]] : ['default'],
    projects: [
      // One module graph per worker, not per file: each file re-imported the gateway (139 s of the quick project's
      // import time, 17 s this way; npm test 6:34 -> 5:09 on a quiet 2-core machine). Files clean up what they start.
      { extends: true, test: { name: 'quick', include: ['test/**/*.test.ts'], exclude: [...SLOW, ...SKIPPED], isolate: false } },
      { extends: true, test: { name: 'slow', include: SLOW, exclude: SKIPPED } },
    ],
  },
});
