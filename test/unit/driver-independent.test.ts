import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ON_DRIVERS, PROCESSES_OF_THEIR_OWN, UNIT_TESTS_ON_DRIVERS, driverIndependentFiles } from '../driver-independent.js';

/**
 * The server pass of `.ci/run` skips the files test/driver-independent.ts lists: none of them may reach this run's
 * drivers, or a driver-dependent test would silently run on embedded drivers only.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Where those are defined, not used: importing it for something else (RAISED_LIMITS, say) is no use of the drivers. */
const DEFINITIONS = 'testkit/test-environment.ts';

/** The file and the test support modules it imports, directly or not. */
function withSupport(file: string, seen = new Set<string>()): string[] {
  if (seen.has(file) || file === DEFINITIONS) return [];
  seen.add(file);
  const source = readFileSync(join(ROOT, file), 'utf8');
  for (const [, specifier] of source.matchAll(/from '(\.[^']+)'/g)) {
    const imported = relative(ROOT, resolve(dirname(join(ROOT, file)), specifier!.replace(/\.js$/, '.ts')))
      .split('\\')
      .join('/');
    if (imported.startsWith('testkit/')) withSupport(imported, seen);
  }
  return [...seen];
}

const usesDrivers = (file: string) =>
  withSupport(file).filter((module) => ON_DRIVERS.some((pattern) => pattern.test(readFileSync(join(ROOT, module), 'utf8'))));

describe('the files the server pass skips', () => {
  it('reach none of the run’s drivers, directly or through test support', () => {
    const files = driverIndependentFiles(ROOT);
    expect(files).toContain('test/unit/geo/geometry.test.ts');
    expect(files).toContain('test/integration/process-data-dir.test.ts');
    const offenders = files.filter((file) => usesDrivers(file).length > 0).map((file) => `${file}: ${usesDrivers(file).join(', ')}`);
    expect(offenders).toEqual([]);
  });

  it('are named by paths that exist, and the unit tests kept in the server pass are there for their drivers', () => {
    for (const file of [...UNIT_TESTS_ON_DRIVERS, ...PROCESSES_OF_THEIR_OWN]) expect(existsSync(join(ROOT, file)), file).toBe(true);
    for (const file of UNIT_TESTS_ON_DRIVERS) expect(usesDrivers(file), file).not.toEqual([]);
  });

  it('would catch a unit test that starts a test gateway', () => {
    expect(usesDrivers('test/integration/foundation.test.ts')).toContain('test/integration/foundation.test.ts');
    expect(usesDrivers('test/cluster/cluster.test.ts')).not.toEqual([]);
  });
});
