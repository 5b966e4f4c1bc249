import { createServer } from 'node:net';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { createBus } from '../shared/bus/index.js';
import type { Config } from '../shared/config.js';
import { createJobQueue } from '../shared/jobs/index.js';
import { startReportMaterializer } from '../shared/reports/materializations.js';
import { createLogger, type Logger } from '../shared/logger.js';
import { openStorage } from '../shared/storage/index.js';
import { StartError, boundedStep } from '../shared/process-guard.js';
import { processorsFor } from '../workers/processors/index.js';
import { RequestAuthenticator } from './auth/authenticator.js';
import { CredentialService } from './auth/credential-service.js';
import { CartographyService } from './cartography/cartography-service.js';
import { PositionPipeline } from './pipeline/position-pipeline.js';
import { BuildingRegistry } from './realtime/building-registry.js';
import { DeviceDirectory } from './realtime/device-directory.js';
import { RealtimeService } from './realtime/realtime-service.js';
import { attachLiveFeeds } from './ws/live-feeds.js';
import { EvacuationService } from './evacuations/evacuation-service.js';
import { attachMusterDetection } from './evacuations/muster-detection.js';
import { evacuationRoutes } from './routes/evacuations.route.js';
import { WebSocketGateway } from './ws/ws-gateway.js';
import { AlarmEscalation } from './alarms/alarm-escalation.js';
import { AlarmService } from './alarms/alarm-service.js';
import type { Channels } from './bus-channels.js';
import { AlarmButton } from './alarms/alarm-button.js';
import { RequestedAlarms } from './alarms/requested-alarms.js';
import { createDetection } from './detection/index.js';
import { DetectionSweep } from './detection/detection-sweep.js';
import { StorageWatch } from './detection/storage-watch.js';
import { createClusterNode } from './cluster/index.js';
import { PositionStore } from '../shared/positions/position-store.js';
import { PositionWriter } from '../shared/positions/position-writer.js';
import { TokenService, loadJwtSecret } from './auth/token-service.js';
import { createLimiterBackend } from './auth/limiter-backend.js';
import { LoginThrottle } from './auth/login-throttle.js';
import { ClientAddresses } from './http/client-address.js';
import { SecurityAudit } from './audit/security-events.js';
import { RateLimits } from './http/rate-limit.js';
import { bootstrapFirstAdmin, type BootstrapResult } from './bootstrap.js';
import { HttpServer } from './http/http-server.js';
import type { RouteDefinition } from './http/route.js';
import { loadNativeUws } from './http/uws.js';
import { authRoutes } from './routes/auth.route.js';
import { alarmRoutes } from './routes/alarms.route.js';
import { reportRoutes } from './routes/reports.route.js';
import { realtimeRoutes } from './routes/realtime.route.js';
import { historyRoutes } from './routes/history.route.js';
import { auditRoutes } from './routes/audit.route.js';
import { AuditService } from './audit/audit-service.js';
import { cartographyRoutes } from './routes/cartography.route.js';
import { deviceRoutes } from './routes/devices.route.js';
import { groupRoutes } from './routes/groups.route.js';
import { healthRoutes } from './routes/health.route.js';
import { imageRoutes } from './routes/images.route.js';
import { organizationRoutes } from './routes/organizations.route.js';
import { userRoutes } from './routes/users.route.js';
import { openApiRoutes } from './routes/openapi.route.js';
import { consoleRoutes } from './routes/console.route.js';
import { routingRoutes } from './routes/routing.route.js';
import { RoutingService } from './routing/routing-service.js';
import { webhookRoutes } from './routes/webhooks.route.js';
import { privacyRoutes } from './routes/privacy.route.js';
import { RetentionSweep } from './privacy/retention-sweep.js';
import { TrackingWindows } from './privacy/tracking-windows.js';
import { resumeErasures } from '../shared/privacy/erasure.js';
import { retentionMaxima } from '../shared/privacy/retention.js';
import { WebhookService } from './webhooks/webhook-service.js';
import type { GatewayServices } from './services.js';
import { registerSources } from '../shared/metrics/metrics.js';
import { startMetricsListener } from '../shared/metrics/metrics-server.js';
import { gatewayMetricSources } from './gateway-metrics.js';
import { EMBEDDED_HOLD_MS } from '../shared/pacing.js';

export interface Gateway {
  services: GatewayServices;
  /** The port actually bound (useful with PORT=0). */
  port: number;
  /** The port of the `/metrics` listener (METRICS_PORT, `auto` in tests); undefined when METRICS_PORT=0. */
  metricsPort: number | undefined;
  bootstrap: BootstrapResult;
  /** Every route mounted, for tests that sweep all of them (permissions, isolation). */
  routes: readonly RouteDefinition[];
  /** Graceful stop: refuse new work, finish what is in flight, flush, close every connection. */
  close(): Promise<void>;
}

/**
 * Boots one gateway: storage (migrated), bus, job queue, first admin, routes, then listens.
 * Everything a test needs to run a real gateway in-process on a free port.
 */
export interface GatewayOptions {
  logger?: Logger;
  /** Extra routes mounted beside the product's (tests use it to probe the HTTP layer). */
  extraRoutes?: (services: GatewayServices) => RouteDefinition[];
}

export async function startGateway(config: Config, options: GatewayOptions = {}): Promise<Gateway> {
  const logger = options.logger ?? createLogger(config.LOG_LEVEL, { service: 'gateway' });
  const uws = loadNativeUws();
  const storage = await openStorage(config, logger);
  const bus = createBus<Channels>(config, logger);
  const jobs = createJobQueue(config, processorsFor(config), { storage, logger }, logger);
  const tokens = new TokenService(loadJwtSecret(config), config.JWT_TTL_SECONDS);
  const limiters = createLimiterBackend(config);
  const credentials = new CredentialService(storage, tokens, config, new LoginThrottle(limiters, config));
  const authenticator = new RequestAuthenticator(tokens, storage, bus, credentials);
  const rateLimits = new RateLimits(limiters, config, logger);
  await authenticator.start();
  const cartography = new CartographyService(bus, logger);
  const registry = new BuildingRegistry(storage, bus, logger, { ttlMs: config.CACHE_TTL_SECONDS * 1000 });
  const devices = new DeviceDirectory(storage, bus, {
    ttlMs: config.CACHE_TTL_SECONDS * 1000,
    logger,
    quota: { maxPerOrganization: config.DEVICES_MAX_PER_ORGANIZATION, maxNewPerUpload: config.DEVICES_MAX_NEW_PER_UPLOAD },
  });
  const positionStore = new PositionStore(storage, logger, { maxAgeMs: config.POSITIONS_MAX_AGE_SECONDS * 1000 });
  await positionStore.startMaintenance(); // today's partition and the next days', then hourly
  // PGlite has one connection, and runs in this thread: a commit is sized to hold it about EMBEDDED_HOLD_MS, so
  // another organization's write waits for at most one such commit (position-writer.ts). A server takes up to 4
  // commits of 1,000 rows at once (one per writer pool connection, server-storage.ts): measured, that stores
  // about 1.5x what 2 commits of 10,000 did.
  const writer =
    storage.kind === 'embedded'
      ? new PositionWriter(positionStore, 10_000, 1, { commitBudgetMs: EMBEDDED_HOLD_MS })
      : new PositionWriter(positionStore, 1000, 4);
  const realtime = new RealtimeService(
    bus,
    registry,
    positionStore,
    {
      liveTtlSeconds: config.LIVE_POSITION_TTL_SECONDS,
      retentionDays: config.POSITIONS_RETENTION_DAYS,
      shards: config.CLUSTER_SHARDS,
      interestLingerMs: config.BUS_INTEREST_LINGER_MS,
    },
    logger,
  );
  // Webhook deliveries are stored with the alarm events and zone events that owe them (webhook-service.ts).
  const webhooks = new WebhookService(storage, jobs, config, logger);
  const alarms = new AlarmService(storage, bus, webhooks.alarmHook, logger);
  // The detectors, their outbox, and the shard handler through which an owner detects (detection/index.ts).
  const detection = createDetection({ config, storage, registry, writer, bus, logger, alarms, webhooks, live: realtime.live });
  // Detection is partitioned by building across gateways: this one runs it for the buildings it owns.
  const cluster = createClusterNode(config, detection.shards, logger);
  // Timeouts, outbox retries and escalation, emitting only for the buildings owned here.
  const sweep = new DetectionSweep({
    engine: detection.engine,
    outbox: detection.outbox,
    owns: (buildingId) => cluster.ownsBuilding(buildingId),
    logger,
    escalation: new AlarmEscalation(storage, alarms),
  });
  // Positions outside their person's tracking window are dropped on the hot path (gateway/privacy).
  const trackingWindows = new TrackingWindows(storage, bus, config.CACHE_TTL_SECONDS * 1000);
  // The hot path, every step listed in order in position-pipeline.ts.
  const pipeline = new PositionPipeline({
    registry,
    devices,
    writer,
    live: realtime,
    logger,
    alarms: new RequestedAlarms(
      alarms,
      new AlarmButton(config.ALARM_BUTTON_DEBOUNCE_S * 1000, config.ALARM_BUTTON_RAISES_PER_MINUTE),
      config.DETECTION_REORDER_WINDOW_SECONDS * 1000,
    ),
    owners: cluster,
    trackingWindows,
    maxAgeMs: config.POSITIONS_MAX_AGE_SECONDS * 1000,
    skipStage: config.BENCH_SKIP_STAGE,
  });
  if (config.BENCH_SKIP_STAGE !== 'none') logger.warn({ stage: config.BENCH_SKIP_STAGE }, 'BENCH_SKIP_STAGE: positions skip this stage');
  const routing = new RoutingService(storage, registry, realtime, bus);
  const evacuations = new EvacuationService(
    storage,
    registry,
    realtime,
    bus,
    logger,
    config.EVACUATION_PRESENCE_WINDOW_S * 1000,
    webhooks.evacuationHook,
  );
  const websockets = new WebSocketGateway(
    { logger, authenticator, pipeline, registry, storage, rateLimits, interest: realtime.interest },
    {
      authTimeoutMs: config.WS_AUTH_TIMEOUT_MS,
      maxMessageBytes: config.WS_MAX_MESSAGE_BYTES,
      coalesceBytes: config.WS_COALESCE_BYTES,
      maxBufferBytes: config.WS_MAX_BUFFER_BYTES,
      maxTopics: config.WS_MAX_TOPICS,
      maxInFlight: config.WS_MAX_IN_FLIGHT,
      maxUnauthenticatedPerAddress: config.WS_MAX_UNAUTHENTICATED_PER_ADDRESS,
      revalidateMs: config.WS_REVALIDATE_SECONDS * 1000,
      maxFeedBufferBytes: config.WS_MAX_FEED_BUFFER_BYTES,
      maxTotalBacklogBytes: config.WS_MAX_TOTAL_BACKLOG_BYTES,
      maxSocketsPerUser: config.WS_MAX_SOCKETS_PER_USER,
      maxSocketsPerCredential: config.WS_MAX_SOCKETS_PER_CREDENTIAL,
      maxSocketsPerAddress: config.WS_MAX_SOCKETS_PER_ADDRESS,
    },
  );
  // Every bus -> socket feed (positions, zone events, alarms and their replay, revoked credentials).
  await attachLiveFeeds({ bus, realtime, alarms, evacuations }, websockets);
  await Promise.all([
    registry.start(),
    devices.start(),
    realtime.start(),
    routing.start(),
    webhooks.start(),
    evacuations.start(),
    trackingWindows.start(),
  ]);
  await cluster.start(); // joins; the shards it takes are rebuilt from storage in the background
  sweep.start(); // once a second
  alarms.startMaintenance(); // prunes idempotency keys past any retry, hourly
  // The owner of a building marks its roll: assembly points reached (zone enters), and arrivals (positions).
  await attachMusterDetection({ bus, realtime, evacuations, logger }, (buildingId) => cluster.ownsBuilding(buildingId));
  const securityAudit = new SecurityAudit(storage, logger);
  const clientAddresses = new ClientAddresses(config.TRUSTED_PROXIES);
  // A building alarm closed (on any gateway) ends its storm here, if this gateway holds it.
  await bus.subscribe('alarms', (messages) => detection.engine.alarmsChanged(messages));
  // A database outage refuses every upload: silence caused by it is ours, so detection waits it out.
  const storageWatch = new StorageWatch(() => storage.ping(), detection.engine, logger);
  storageWatch.start();
  const services: GatewayServices = {
    config,
    logger,
    storage,
    bus,
    jobs,
    tokens,
    credentials,
    authenticator,
    cartography,
    registry,
    devices,
    writer,
    pipeline,
    realtime,
    alarms,
    detection,
    sweep,
    cluster,
    routing,
    evacuations,
    trackingWindows,
    webhooks,
    rateLimits,
    websockets,
    securityAudit,
    clientAddresses,
  };
  const bootstrap = await bootstrapFirstAdmin(storage, config, logger);
  // Erasures a stop interrupted carry on from what they saved (shared/privacy/erasure.ts).
  await resumeErasures(storage, (job) => jobs.schedule(job)).catch((error) => logger.error({ err: error }, 'could not resume erasures'));

  const audit = new AuditService(storage);
  // Each organization's data past its retention periods, audit log included: bounded deletes, hourly.
  const retention = new RetentionSweep(storage, retentionMaxima(config), logger);
  retention.start();
  // Without Redis the jobs run here, and so does the report materializer (workers/main.ts runs it otherwise).
  const materializer = jobs.kind === 'local' ? startReportMaterializer(storage, config, logger) : undefined;
  const http = new HttpServer({
    maxBodyBytes: config.MAX_BODY_BYTES,
    logger,
    authenticate: authenticator.authenticate,
    rateLimit: rateLimits.forRequest,
    clientAddresses,
    onRefused: (principal, request, error) =>
      securityAudit.record({
        kind: 'refused',
        organizationId: principal.organizationId,
        userId: principal.userId,
        email: principal.email,
        via: principal.via,
        apiKeyId: principal.apiKeyId,
        method: request.method,
        route: request.route,
        address: request.address,
        detail: error.message,
      }),
  });
  http.add(
    ...healthRoutes(services),
    ...authRoutes(services),
    ...organizationRoutes(services),
    ...userRoutes(services),
    ...groupRoutes(services),
    ...privacyRoutes(services),
    ...deviceRoutes(services),
    ...cartographyRoutes(services),
    ...realtimeRoutes(services),
    ...alarmRoutes(services),
    ...evacuationRoutes(services),
    ...reportRoutes(services),
    ...historyRoutes(services),
    ...routingRoutes(services),
    ...webhookRoutes(services),
    ...imageRoutes(services),
    ...auditRoutes(audit),
    ...consoleRoutes(logger),
    ...openApiRoutes(() => http.router.routes),
  );
  if (options.extraRoutes) http.add(...options.extraRoutes(services));

  // Before the API listens: a metrics port that cannot be bound stops the start, naming METRICS_PORT.
  const metrics = await startMetricsListener({
    host: config.METRICS_HOST,
    port: config.METRICS_PORT,
    token: config.METRICS_TOKEN,
    logger,
    variable: 'METRICS_PORT',
  });
  const unregisterMetrics = registerSources(gatewayMetricSources(services));

  const app = uws.App();
  websockets.attach(app); // before the HTTP catch-all, so /api/v1/ws upgrades
  http.attach(app);
  const listenSocket = await listenOn(app, config);
  const port = uws.us_socket_local_port(listenSocket);
  logger.info({ host: config.HOST, port, storage: storage.kind, bus: bus.kind, jobs: jobs.kind }, 'gateway listening');

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      logger.info('gateway draining');
      http.stopAccepting();
      await metrics?.close();
      unregisterMetrics();
      uws.us_listen_socket_close(listenSocket);
      await Promise.all([http.drain(config.SHUTDOWN_GRACE_SECONDS * 1000), websockets.close(config.SHUTDOWN_GRACE_SECONDS * 1000)]);
      sweep.stop();
      alarms.stopMaintenance();
      evacuations.stop();
      storageWatch.stop();
      // Each step after the drain is bounded: with Redis or PostgreSQL away, one would otherwise wait for its
      // return and hold every later step (and the exit) with it. What was acknowledged is committed already.
      const step = (name: string, work: () => Promise<unknown>) => boundedStep(logger, name, work, CLOSE_STEP_MS);
      // Embedded storage has no server to lose: its steps run to the end (the process's own deadline still holds).
      const storageStep = (name: string, work: () => Promise<unknown>) => (storage.kind === 'server' ? step(name, work) : work());
      // Finishes the batch being detected, gives the shards back and leaves: the others take over at once.
      await step('cluster.stop', () => cluster.stop());
      await storageStep('deadLetters.release', () => detection.outbox.release()); // their next owners retry them at once
      await storageStep('writer.flush', () => writer.flush()); // commits in flight, none of them acknowledged yet
      realtime.stop();
      positionStore.stopMaintenance();
      await storageStep('retention.stop', () => retention.stop());
      await step('materializer.stop', async () => materializer?.stop());
      webhooks.stop();
      // This uWS build has no app.close(): the closed listen socket plus process exit end idle keep-alive sockets.
      await step('jobs.close', () => jobs.close());
      await step('bus.close', () => bus.close());
      await step('limiters.close', () => limiters.close());
      await storageStep('storage.close', () => storage.close());
      logger.info('gateway stopped');
    })());

  return { services, port, metricsPort: metrics?.port, bootstrap, routes: http.router.routes, close };
}

/** How long one step of a gateway's close may wait (a Redis or PostgreSQL that went away) before the next runs. */
const CLOSE_STEP_MS = 2000;

/** uWS's listen option that leaves SO_REUSEPORT off (ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT). */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;
const LIBUS_LISTEN_DEFAULT = 0;

/**
 * Listens on HOST:PORT. uWS sets SO_REUSEPORT by default, so a second gateway on a bound port would start and
 * silently take every other connection (with another DATA_DIR: another database). Unless REUSE_PORT asks for
 * that (several gateways of one deployment behind the kernel's balancing), the port is taken exclusively, and
 * a port in use is a start error that says so.
 */
async function listenOn(app: TemplatedApp, config: Config): Promise<us_listen_socket> {
  const options = config.REUSE_PORT ? LIBUS_LISTEN_DEFAULT : LIBUS_LISTEN_EXCLUSIVE_PORT;
  // The typings lack the (host, port, options, cb) form the native binding has.
  const listen = app.listen as unknown as (
    host: string,
    port: number,
    options: number,
    cb: (socket: us_listen_socket | false) => void,
  ) => void;
  const socket = await new Promise<us_listen_socket | false>((resolve) => listen.call(app, config.HOST, config.PORT, options, resolve));
  if (socket) return socket;
  // uWS says only "no": node's own listen on the same address tells why.
  const code = await new Promise<string | undefined>((resolve) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => resolve(error.code));
    probe.listen({ host: config.HOST, port: config.PORT, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
  if (code === 'EADDRINUSE') {
    throw new StartError(
      `PORT ${config.PORT} is in use: another Floorcast? (on ${config.HOST}; stop it or choose another PORT; REUSE_PORT=true lets gateways of one deployment share it)`,
    );
  }
  throw new StartError(`PORT: cannot listen on ${config.HOST}:${config.PORT}${code ? ` (${code})` : ''}`);
}
