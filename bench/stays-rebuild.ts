import { report } from './harness.js';
import { materializerScenario } from './materializer.bench.js';

/**
 * The materializer scenario on its own (see bench/materializer.bench.ts for its MATERIALIZER_* settings):
 * `DATABASE_URL=... npx tsx bench/stays-rebuild.ts` (a scratch database, dropped at the end).
 */
report(await materializerScenario.run(), { node: process.version, storage: process.env.DATABASE_URL ? 'postgresql' : 'embedded' });
process.exit(0);
