import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { startGateway, type Gateway } from '../gateway/app.js';
import { loadConfigOrExit, type Config } from '../shared/config.js';
import { createLogger } from '../shared/logger.js';
import { ProcessGuard, SHUTDOWN_MARGIN_MS, describeStartFailure, stopOnSignals } from '../shared/process-guard.js';
import { lockDataDirOrExit } from '../shared/storage/data-dir-lock.js';
import { DemoApi, DemoApiError } from './api-client.js';
import { seedDemoVenue } from './seed.js';
import { Simulator } from './simulator.js';

/** With `--drill`, the drill starts this long after the devices: everyone has been seen in the building by then. */
const DRILL_AFTER_MS = 20_000;

/**
 * `npm run demo`: the embedded product as `npm start` runs it (same environment), a sample venue seeded through
 * the public API (reused on later starts), and 50 simulated devices walking it, in one process.
 * `npm run demo -- --drill` also declares an evacuation drill 20 s in: the simulated people walk to the assembly
 * points (a few stay behind) and the console's evacuation view fills up.
 */
async function main(): Promise<void> {
  const { values: flags } = parseArgs({ options: { drill: { type: 'boolean', default: false } } });
  const config = loadConfigOrExit();
  // One request line a second from the simulator would scroll the summary (and its one-time password) away:
  // per-request lines are debug here (LOG_LEVEL=debug shows them).
  const logger = createLogger(config.LOG_LEVEL, { service: 'gateway' }, { debugMessages: ['request'] });
  lockDataDirOrExit(config); // one writer per DATA_DIR, as `npm start`
  const guard = ProcessGuard.install({ logger, flushTimeoutMs: config.SHUTDOWN_GRACE_SECONDS * 1000 });
  const gateway = await startGateway(config, { logger });
  let simulator: Simulator | undefined;
  let drillTimer: NodeJS.Timeout | undefined;
  // One way down, for a signal and for a fatal fault alike: the simulator first, then the gateway.
  const close = async () => {
    clearTimeout(drillTimer);
    await simulator?.stop();
    await gateway.close();
  };
  guard.flushWith(close);
  const stopping = stopOnSignals(logger, 'the demo', close, { deadlineMs: config.SHUTDOWN_GRACE_SECONDS * 1000 + SHUTDOWN_MARGIN_MS });

  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  const baseUrl = `http://${host}:${gateway.port}`;
  const seeder = await seederApi(config, gateway, baseUrl);
  const venue = await seedDemoVenue(seeder);
  const simulatorKeyFile = join(config.DATA_DIR, SIMULATOR_KEY_FILE);
  keepSecret(simulatorKeyFile, venue.simulatorApiKey);
  simulator = await Simulator.connect({
    url: baseUrl,
    apiKey: venue.simulatorApiKey,
    buildingId: venue.buildingId,
    log: (line) => logger.info(`demo: ${line}`),
  });
  if (stopping()) return;
  simulator.start();
  if (flags.drill)
    drillTimer = setTimeout(() => void startDrill(seeder, venue.buildingId, (line) => logger.info(`demo: ${line}`)), DRILL_AFTER_MS);

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
      `  Simulator: npx tsx demo/simulator.ts --url ${baseUrl} --api-key "$(cat ${simulatorKeyFile})"   (key ${keyHint(venue.simulatorApiKey)}, replaced at each start)`,
      'Alarms to expect within a minute: DANGER, GEOFENCE_MAX_STAY_TIME, DEADMAN (silence). Ctrl-C stops.',
      flags.drill
        ? `Drill:     an evacuation drill starts in ${DRILL_AFTER_MS / 1000} s: watch the Evacuation view fill up (End drill there).`
        : 'Drill:     Start a drill in the console (Evacuation bar), or restart with npm run demo -- --drill.',
      '',
    ].join('\n'),
  );
}

/** Declares the evacuation drill of `--drill` (the simulated people follow it); one already active is left as it is. */
async function startDrill(api: DemoApi, buildingId: number, log: (line: string) => void): Promise<void> {
  try {
    const drill = await api.post<{ id: string; counts: { on_roll: number } }>(`/api/v1/buildings/${buildingId}/evacuations`, {
      drill: true,
      note: 'Demo drill (npm run demo -- --drill)',
    });
    log(`drill ${drill.id} started: ${drill.counts.on_roll} people on the roll`);
  } catch (error) {
    log(
      error instanceof DemoApiError && error.status === 409
        ? 'a drill or evacuation is already active'
        : `drill not started: ${String(error)}`,
    );
  }
}

/**
 * The demo's own credential: a read-write key of an organization administrator (never the platform
 * administrator), kept under DATA_DIR (mode 0600) so that later starts can seed without the generated password,
 * and replaced at each start (the previous one revoked), so a copy in a backup stops working at the next start.
 */
const SEEDER_KEY_FILE = 'demo-seeder-key';
const SEEDER_EMAIL = 'seeder@demo.floorcast.local';
const SEEDER_KEY_DESCRIPTION = 'Floorcast demo seeding (npm run demo), replaced at each start';
/** Where earlier versions kept a platform administrator's key: revoked and removed when found. */
const LEGACY_ADMIN_KEY_FILE = 'demo-admin-key';
const LEGACY_ADMIN_KEY_DESCRIPTION = 'Floorcast demo seeding (npm run demo)';
/** The simulator's key, kept beside it so the command printed need not show it. */
const SIMULATOR_KEY_FILE = 'demo-simulator-key';

/**
 * A client for seeding, as the demo's organization administrator: signed in first with the administrator's
 * password (generated on this first start, or ADMIN_PASSWORD; used for nothing else and never stored) or with the
 * key the previous start kept; either way it leaves with a new key, and the previous one revoked.
 */
async function seederApi(config: Config, gateway: Gateway, baseUrl: string): Promise<DemoApi> {
  const keyFile = join(config.DATA_DIR, SEEDER_KEY_FILE);
  const legacyFile = join(config.DATA_DIR, LEGACY_ADMIN_KEY_FILE);
  const password = gateway.bootstrap.generatedPassword ?? config.ADMIN_PASSWORD;
  let api: DemoApi;
  if (password) api = await DemoApi.signIn(baseUrl, gateway.bootstrap.email ?? config.ADMIN_EMAIL, password);
  else if (existsSync(keyFile)) api = new DemoApi(baseUrl, { apiKey: readFileSync(keyFile, 'utf8').trim() });
  else if (existsSync(legacyFile)) api = new DemoApi(baseUrl, { apiKey: readFileSync(legacyFile, 'utf8').trim() });
  else
    throw new Error(
      `cannot sign in to seed the demo: set ADMIN_PASSWORD (the first start printed the generated one), or use a fresh DATA_DIR`,
    );

  const users = await api.get<{ data: { id: string; email: string }[] }>('/api/v1/users?size=1000');
  const seeder: { id: string } =
    users.data.find((user) => user.email === SEEDER_EMAIL) ??
    (await api.post<{ id: string }>('/api/v1/users', {
      email: SEEDER_EMAIL,
      password: randomBytes(18).toString('base64url'),
      role: 'admin',
      full_name: 'Demo seeder',
    }));
  const fresh = await api.post<{ id: string; apikey: string }>('/api/v1/auth/apikeys', {
    permission: 'read-write',
    description: SEEDER_KEY_DESCRIPTION,
    user_id: seeder.id,
  });
  for (const key of await api.get<{ id: string; description: string }[]>(`/api/v1/auth/apikeys?user_id=${seeder.id}`)) {
    if (key.description === SEEDER_KEY_DESCRIPTION && key.id !== fresh.id) await api.delete(`/api/v1/auth/apikeys/${key.id}`);
  }
  keepSecret(keyFile, fresh.apikey);
  if (existsSync(legacyFile)) {
    // An earlier demo kept a platform administrator's key here: revoked with itself, then removed.
    const legacy = new DemoApi(baseUrl, { apiKey: readFileSync(legacyFile, 'utf8').trim() });
    const own = await legacy.get<{ id: string; description: string }[]>('/api/v1/auth/apikeys').catch(() => []);
    for (const key of own)
      if (key.description === LEGACY_ADMIN_KEY_DESCRIPTION) await legacy.delete(`/api/v1/auth/apikeys/${key.id}`).catch(() => undefined);
    unlinkSync(legacyFile);
  }
  return new DemoApi(baseUrl, { apiKey: fresh.apikey });
}

/** Writes a secret readable by this user only, whole (a rename), so no reader sees half of it. */
function keepSecret(file: string, secret: string): void {
  mkdirSync(dirname(file), { recursive: true });
  const draft = `${file}.${process.pid}`;
  writeFileSync(draft, `${secret}\n`, { mode: 0o600 });
  chmodSync(draft, 0o600);
  renameSync(draft, file);
}

/** Enough of a key to tell it apart, never enough to use it. */
const keyHint = (key: string) => `${key.slice(0, 7)}…`;

main().catch((error) => {
  process.stderr.write(`Floorcast demo failed: ${describeStartFailure(error)}\n`);
  process.exit(1);
});
