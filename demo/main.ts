import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGateway, type Gateway } from '../gateway/app.js';
import { loadConfigOrExit, type Config } from '../shared/config.js';
import { createLogger } from '../shared/logger.js';
import { ProcessGuard, stopOnSignals } from '../shared/process-guard.js';
import { DemoApi } from './api-client.js';
import { seedDemoVenue } from './seed.js';
import { Simulator } from './simulator.js';

/** Where the demo keeps an admin API key, for later starts when the generated password is no longer known. */
const ADMIN_KEY_FILE = 'demo-admin-key';

/**
 * `npm run demo`: the embedded product as `npm start` runs it (same environment), a sample venue seeded through
 * the public API (reused on later starts), and 50 simulated devices walking it, in one process.
 */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  // One request line a second from the simulator would scroll the summary (and its one-time password) away:
  // per-request lines are debug here (LOG_LEVEL=debug shows them).
  const logger = createLogger(config.LOG_LEVEL, { service: 'gateway' }, { debugMessages: ['request'] });
  const guard = ProcessGuard.install({ logger, flushTimeoutMs: config.SHUTDOWN_GRACE_SECONDS * 1000 });
  const gateway = await startGateway(config, { logger });
  let simulator: Simulator | undefined;
  // One way down, for a signal and for a fatal fault alike: the simulator first, then the gateway.
  const close = async () => {
    await simulator?.stop();
    await gateway.close();
  };
  guard.flushWith(close);
  const stopping = stopOnSignals(logger, 'the demo', close);

  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  const baseUrl = `http://${host}:${gateway.port}`;
  const admin = await adminApi(config, gateway, baseUrl);
  const venue = await seedDemoVenue(admin);
  simulator = await Simulator.connect({ url: baseUrl, apiKey: venue.simulatorApiKey, buildingId: venue.buildingId, log: (line) => logger.info(`demo: ${line}`) });
  if (stopping()) return;
  simulator.start();

  const password = gateway.bootstrap.generatedPassword
    ? `${gateway.bootstrap.generatedPassword} (generated on this first start, shown once)`
    : config.ADMIN_PASSWORD
      ? 'the value of ADMIN_PASSWORD'
      : 'the one printed by the first start';
  process.stdout.write(
    [
      '',
      `Floorcast demo: building ${venue.buildingId} ${venue.created ? 'seeded' : 'reused'}, 50 simulated devices walking at 1 Hz.`,
      `  Console:   ${baseUrl}/console`,
      `  E-mail:    ${gateway.bootstrap.email ?? config.ADMIN_EMAIL}`,
      `  Password:  ${password}`,
      `  Simulator: tsx demo/simulator.ts --url ${baseUrl} --api-key ${venue.simulatorApiKey}`,
      'Alarms to expect within a minute: DANGER, GEOFENCE_MAX_STAY_TIME, DEADMAN (silence). Ctrl-C stops.',
      '',
    ].join('\n'),
  );
}

/**
 * Signs in as the administrator: with the password generated on this first start or ADMIN_PASSWORD, or else
 * with the admin API key a first start kept under DATA_DIR (the generated password is not stored anywhere).
 */
async function adminApi(config: Config, gateway: Gateway, baseUrl: string): Promise<DemoApi> {
  const keyFile = join(config.DATA_DIR, ADMIN_KEY_FILE);
  if (gateway.bootstrap.generatedPassword) {
    const api = await DemoApi.signIn(baseUrl, gateway.bootstrap.email ?? config.ADMIN_EMAIL, gateway.bootstrap.generatedPassword);
    const key = await api.post('/api/v1/auth/apikeys', { permission: 'read-write', description: 'Floorcast demo seeding (npm run demo)' });
    mkdirSync(config.DATA_DIR, { recursive: true });
    writeFileSync(keyFile, `${key.apikey}\n`, { mode: 0o600 });
    chmodSync(keyFile, 0o600);
    return api;
  }
  if (config.ADMIN_PASSWORD) return DemoApi.signIn(baseUrl, config.ADMIN_EMAIL, config.ADMIN_PASSWORD);
  if (existsSync(keyFile)) return new DemoApi(baseUrl, { apiKey: readFileSync(keyFile, 'utf8').trim() });
  throw new Error(`cannot sign in as ${config.ADMIN_EMAIL} to seed the demo: set ADMIN_PASSWORD (the first start printed the generated one), or use a fresh DATA_DIR`);
}

main().catch((error) => {
  process.stderr.write(`Floorcast demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
