import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Test files that run exactly the same whatever drivers the run selects (DATABASE_URL, REDIS_URL): `.ci/run`'s
 * server pass (FLOORCAST_SERVER_PASS=1, see vitest.config.ts) skips them, the embedded pass having just run them.
 * A file that opens storage, a bus or jobs on this run's drivers, starts a test gateway or calls
 * createTestEnvironment is driver-dependent and is not listed; test/unit/driver-independent.test.ts fails if one is.
 *
 * They are: every unit test but those below, and the process and fault tests whose processes get an environment
 * written out in full by the test (embedded storage of their own, or private servers), never this run's drivers.
 */
export const UNIT_TESTS_ON_DRIVERS = [
  'test/unit/bus.contract.test.ts',
  'test/unit/cluster/leases.test.ts',
  'test/unit/cluster/shard-log.contract.test.ts',
  'test/unit/job-worker-watchdog.test.ts',
  'test/unit/jobs.contract.test.ts',
  'test/unit/login-throttle.test.ts',
  'test/unit/storage.contract.test.ts',
];

export const PROCESSES_OF_THEIR_OWN = [
  'test/integration/process-data-dir.test.ts',
  'test/integration/process-demo-key.test.ts',
  'test/integration/process-guard.test.ts',
  'test/fault/cluster-kill.test.ts',
  'test/fault/evacuation-kill.test.ts',
  'test/fault/gateway-kill.test.ts',
  'test/fault/gateway-kill-rebuild.test.ts',
  'test/fault/process-outage.test.ts',
];

/**
 * What reaches this run's drivers, in a test or the test support it imports: the test environment and gateways,
 * the pass's server URLs, config read from process.env. (Kept here, not in the test that looks for them, so that
 * test does not find them in itself.)
 */
export const ON_DRIVERS = [
  /\b(createTestEnvironment|startTestGateway|openOrganizationStorage|startCluster|serverDatabaseUrl|serverRedisUrl|driverLabel)\b/,
  /process\.env\.(DATABASE_URL|REDIS_URL)\b/,
  /\bloadConfig\(\s*\)/,
];

/** The driver-independent files, as paths relative to `root` (the repository). */
export function driverIndependentFiles(root: string): string[] {
  const units = readdirSync(join(root, 'test/unit'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) =>
      relative(root, join(root, 'test/unit', file))
        .split('\\')
        .join('/'),
    )
    .filter((file) => !UNIT_TESTS_ON_DRIVERS.includes(file));
  return [...units.sort(), ...PROCESSES_OF_THEIR_OWN];
}
