import { loadConfigOrExit } from '../shared/config.js';
import { createLogger } from '../shared/logger.js';
import { ProcessGuard, SHUTDOWN_MARGIN_MS, describeStartFailure, stopOnSignals } from '../shared/process-guard.js';
import { lockDataDirOrExit } from '../shared/storage/data-dir-lock.js';
import { startGateway } from './app.js';

/** `npm start`: one gateway process, configured from the environment (see docs/configuration.md). */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const logger = createLogger(config.LOG_LEVEL, { service: 'gateway' });
  // Embedded storage has one writer: a second `npm start` (or the demo, or the admin CLI) on DATA_DIR is refused.
  lockDataDirOrExit(config);
  // Installed first: a fault while starting is logged too. Sockets are told to reconnect before a fatal exit.
  const guard = ProcessGuard.install({ logger, flushTimeoutMs: config.SHUTDOWN_GRACE_SECONDS * 1000 });
  const gateway = await startGateway(config, { logger });
  guard.flushWith(() => gateway.close());
  if (gateway.bootstrap.generatedPassword) {
    // Printed once, on the first start only; it is stored only as a hash.
    process.stdout.write(
      `\nFirst administrator created: ${gateway.bootstrap.email}\nGenerated password (shown once): ${gateway.bootstrap.generatedPassword}\n\n`,
    );
  }
  process.stdout.write(`Floorcast listening on http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${gateway.port}\n`);

  stopOnSignals(logger, 'the gateway', () => gateway.close(), { deadlineMs: config.SHUTDOWN_GRACE_SECONDS * 1000 + SHUTDOWN_MARGIN_MS });
}

main().catch((error) => {
  process.stderr.write(`Floorcast failed to start: ${describeStartFailure(error)}\n`);
  process.exit(1);
});
