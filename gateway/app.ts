import type { us_listen_socket } from 'uWebSockets.js';
import { createBus } from '../shared/bus/index.js';
import type { Config } from '../shared/config.js';
import { setAfterCommitReporter } from '../shared/errors.js';
import { createJobQueue } from '../shared/jobs/index.js';
import { startReportMaterializer } from '../shared/reports/materializations.js';
import { createLogger, type Logger } from '../shared/logger.js';
import { openStorage } from '../shared/storage/index.js';
import { processors } from '../workers/processors/index.js';
import { RequestAuthenticator } from './auth/authenticator.js';
import { CredentialService } from './auth/credential-service.js';
import { CartographyService } from './cartography/cartography-service.js';
import { PositionPipeline } from './pipeline/position-pipeline.js';
import { BuildingRegistry } from './realtime/building-registry.js';
import { DeviceDirectory } from './realtime/device-directory.js';
import { RealtimeService } from './realtime/realtime-service.js';
import { attachLiveFeeds } from './ws/live-feeds.js';
import { WebSocketGateway } from './ws/ws-gateway.js';
import { AlarmService } from './alarms/alarm-service.js';
import { attachDetection } from './detection/building-detection.js';
import { DetectionEngine } from './detection/detection-engine.js';
import { DetectionService } from './detection/detection-service.js';
import { DetectorStateLoader } from './detection/detector-state-loader.js';
import { createClusterNode } from './cluster/index.js';
import { DetectionShards } from './cluster/detection-shards.js';
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
import { WebhookService } from './webhooks/webhook-service.js';
import type { GatewayServices } from './services.js';
import { registerSources } from '../shared/metrics/metrics.js';
import { startMetricsListener } from '../shared/metrics/metrics-server.js';
import { gatewayMetricSources } from './gateway-metrics.js';

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
  setAfterCommitReporter((error, step) => logger.error({ err: error, step }, 'post-commit step failed; the write is committed and answered as such'));
  const uws = loadNativeUws();
  const storage = await openStorage(config, logger);
  const bus = createBus(config, logger);
  const jobs = createJobQueue(config, processors, { storage, logger }, logger);
  const tokens = new TokenService(loadJwtSecret(config), config.JWT_TTL_SECONDS);
  const limiters = createLimiterBackend(config);
  const credentials = new CredentialService(storage, tokens, config, new LoginThrottle(limiters, config));
  const authenticator = new RequestAuthenticator(tokens, storage, bus, credentials);
  const rateLimits = new RateLimits(limiters, config, logger);
  await authenticator.start();
  const cartography = new CartographyService(bus);
  const registry = new BuildingRegistry(storage, bus, logger, { ttlMs: config.CACHE_TTL_SECONDS * 1000 });
  const devices = new DeviceDirectory(storage, bus, { ttlMs: config.CACHE_TTL_SECONDS * 1000, logger });
  const positionStore = new PositionStore(storage, logger, { maxAgeMs: config.POSITIONS_MAX_AGE_SECONDS * 1000 });
  await positionStore.startMaintenance(); // today's partition and the next days', then hourly
  // PGlite has one connection. A server takes up to 4 commits of 1,000 rows at once (one per writer pool
  // connection, server-storage.ts): measured, that stores about 1.5x what 2 commits of 10,000 did.
  const writer = storage.kind === 'embedded' ? new PositionWriter(positionStore) : new PositionWriter(positionStore, 1000, 4);
  const realtime = new RealtimeService(bus, registry, positionStore, { liveTtlSeconds: config.LIVE_POSITION_TTL_SECONDS, retentionDays: config.POSITIONS_RETENTION_DAYS }, logger);
  registry.extend(attachDetection);
  // Webhook deliveries are stored with the alarm events and zone events that owe them (webhook-service.ts).
  const webhooks = new WebhookService(storage, jobs, config, logger);
  const alarms = new AlarmService(storage, bus, webhooks.alarmHook);
  // Silent devices are forgotten once no detector could still need them.
  const engine = new DetectionEngine(registry, Math.max(config.LIVE_POSITION_TTL_SECONDS, 3600) * 1000, config.DETECTION_MAX_TRACKED_DEVICES);
  const detection = new DetectionService(engine, alarms, registry, writer, bus, logger, config.DETECTION_OUTBOX_MAX, (zoneEvents, triggered) =>
    webhooks.detectionsStored(zoneEvents, triggered),
  );
  // A building arriving here (at boot, or from a gateway that left) gets its detector state rebuilt from storage.
  const stateLoader = new DetectorStateLoader(storage, engine, registry, logger, { lookbackMs: engine.forgetAfterMs, maxAgeMs: config.POSITIONS_MAX_AGE_SECONDS * 1000 });
  // Detection is partitioned by building across gateways: this one runs it for the buildings it owns.
  const cluster = createClusterNode(config, new DetectionShards(detection, stateLoader, engine, realtime.live, storage, config.CLUSTER_SHARDS, logger), logger);
  // The hot path, with detection's steps around persistence (position-pipeline.ts lists them in order).
  const pipeline = new PositionPipeline({ registry, devices, writer, bus, logger, maxAgeMs: config.POSITIONS_MAX_AGE_SECONDS * 1000 }, detection.steps(cluster));
  const routing = new RoutingService(storage, registry, realtime.live, bus);
  const websockets = new WebSocketGateway(
    { logger, authenticator, pipeline, registry, storage, rateLimits },
    {
      authTimeoutMs: config.WS_AUTH_TIMEOUT_MS,
      maxMessageBytes: config.WS_MAX_MESSAGE_BYTES,
      coalesceBytes: config.WS_COALESCE_BYTES,
      maxBufferBytes: config.WS_MAX_BUFFER_BYTES,
      maxTopics: config.WS_MAX_TOPICS,
      maxInFlight: config.WS_MAX_IN_FLIGHT,
      maxUnauthenticatedPerAddress: config.WS_MAX_UNAUTHENTICATED_PER_ADDRESS,
    },
  );
  // Every bus -> socket feed (positions, zone events, alarms and their replay, revoked credentials).
  await attachLiveFeeds({ bus, realtime, alarms }, websockets);
  await Promise.all([registry.start(), devices.start(), realtime.start(), routing.start(), webhooks.start()]);
  await cluster.start(); // joins; the shards it takes are rebuilt from storage in the background
  detection.start((buildingId) => cluster.ownsBuilding(buildingId));
  const securityAudit = new SecurityAudit(storage, logger);
  const clientAddresses = new ClientAddresses(config.TRUSTED_PROXIES);
  const services: GatewayServices = { config, logger, storage, bus, jobs, tokens, credentials, authenticator, cartography, registry, devices, writer, pipeline, realtime, alarms, detection, cluster, routing, webhooks, rateLimits, websockets, securityAudit, clientAddresses };
  const bootstrap = await bootstrapFirstAdmin(storage, config, logger);

  const audit = new AuditService(storage, logger, config.AUDIT_RETENTION_DAYS ?? config.POSITIONS_RETENTION_DAYS);
  audit.start(); // the retention sweep, hourly
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
    ...deviceRoutes(services),
    ...cartographyRoutes(services),
    ...realtimeRoutes(services),
    ...alarmRoutes(services),
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
  const metrics = await startMetricsListener({ host: config.METRICS_HOST, port: config.METRICS_PORT, token: config.METRICS_TOKEN, logger });
  const unregisterMetrics = registerSources(gatewayMetricSources(services));

  const app = uws.App();
  websockets.attach(app); // before the HTTP catch-all, so /api/v1/ws upgrades
  http.attach(app);
  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) =>
    app.listen(config.HOST, config.PORT, (socket) => (socket ? resolve(socket) : reject(new Error(`cannot listen on ${config.HOST}:${config.PORT}`)))),
  );
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
      detection.stop();
      // Finishes the batch being detected, gives the shards back and leaves: the others take over at once.
      await cluster.stop();
      await writer.flush(); // nothing acknowledged may be left in memory
      realtime.stop();
      positionStore.stopMaintenance();
      audit.stop();
      await materializer?.stop();
      webhooks.stop();
      // This uWS build has no app.close(): the closed listen socket plus process exit end idle keep-alive sockets.
      await jobs.close();
      await bus.close();
      await limiters.close();
      await storage.close();
      logger.info('gateway stopped');
    })());

  return { services, port, metricsPort: metrics?.port, bootstrap, routes: http.router.routes, close };
}
