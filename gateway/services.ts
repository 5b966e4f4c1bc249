import type { Bus } from './bus-channels.js';
import type { Config } from '../shared/config.js';
import type { JobQueue } from '../shared/jobs/index.js';
import type { Logger } from '../shared/logger.js';
import type { Storage } from '../shared/storage/index.js';
import type { RequestAuthenticator } from './auth/authenticator.js';
import type { CredentialService } from './auth/credential-service.js';
import type { TokenService } from './auth/token-service.js';
import type { CartographyService } from './cartography/cartography-service.js';
import type { PositionPipeline } from './pipeline/position-pipeline.js';
import type { BuildingRegistry } from './realtime/building-registry.js';
import type { DeviceDirectory } from './realtime/device-directory.js';
import type { RealtimeService } from './realtime/realtime-service.js';
import type { WebSocketGateway } from './ws/ws-gateway.js';
import type { RateLimits } from './http/rate-limit.js';
import type { AlarmService } from './alarms/alarm-service.js';
import type { DetectionSweep } from './detection/detection-sweep.js';
import type { Detection } from './detection/index.js';
import type { ClusterNode } from './cluster/cluster-node.js';
import type { PositionWriter } from '../shared/positions/position-writer.js';
import type { RoutingService } from './routing/routing-service.js';
import type { WebhookService } from './webhooks/webhook-service.js';
import type { SecurityAudit } from './audit/security-events.js';
import type { ClientAddresses } from './http/client-address.js';
import type { EvacuationService } from './evacuations/evacuation-service.js';
import type { TrackingWindows } from './privacy/tracking-windows.js';

/** The gateway's long-lived collaborators, built once at boot and handed to every route module. */
export interface GatewayServices {
  config: Config;
  logger: Logger;
  storage: Storage;
  bus: Bus;
  jobs: JobQueue;
  tokens: TokenService;
  credentials: CredentialService;
  authenticator: RequestAuthenticator;
  cartography: CartographyService;
  registry: BuildingRegistry;
  devices: DeviceDirectory;
  writer: PositionWriter;
  pipeline: PositionPipeline;
  realtime: RealtimeService;
  alarms: AlarmService;
  /** The detectors, their outbox and the shard handler (gateway/detection/index.ts). */
  detection: Detection;
  /** The once-a-second sweep: detector timeouts, outbox retries, escalation. */
  sweep: DetectionSweep;
  /** This gateway's membership of the cluster and the shards (buildings) it owns for detection. */
  cluster: ClusterNode;
  routing: RoutingService;
  /** Evacuations and their rolls (issue 31). */
  evacuations: EvacuationService;
  webhooks: WebhookService;
  /** Sign-in outcomes, refusals and revoked refresh chains, in the audit log. */
  securityAudit: SecurityAudit;
  /** The client address of a connection: the peer, or behind a TRUSTED_PROXIES proxy the forwarded one. */
  clientAddresses: ClientAddresses;
  /** Per-credential request and pose budgets (HTTP and WebSocket uploads share them). */
  rateLimits?: RateLimits;
  websockets: WebSocketGateway;
  /** Each person's tracking window, cached per gateway (gateway/privacy). */
  trackingWindows: TrackingWindows;
}
