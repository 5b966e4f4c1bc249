import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each integration test boots a real gateway with its own database: give them room on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    // .ci/run asks for a JSON summary too, to print the plain "N passed, N failed" line CI reads.
    reporters: process.env.VITEST_JSON_SUMMARY ? ['default', ['json', { outputFile: process.env.VITEST_JSON_SUMMARY }]] : ['default'],
  },
});
