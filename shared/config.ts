import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * Every setting of the product, read from the environment once at boot.
 * A bad value stops the process with a message that names the variable (see `loadConfig`).
 */
const optionalString = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value));

/**
 * Values copied from a sample instead of chosen: a JWT secret anyone can read in a repository lets anyone sign
 * tokens. Matched case-insensitively as substrings (the secret) or whole values (the password).
 */
const PLACEHOLDER_SECRET = /change-?me|secret|example|placeholder|replace|your[-_ ]/i;
const PLACEHOLDER_PASSWORD = /change-?me|example|placeholder|^(?:password1?|admin(?:istrator)?1?|12345678|123456789|qwerty123)$/i;
const notPlaceholder = (pattern: RegExp) => (value: string | undefined) => value === undefined || !pattern.test(value);

/** A metrics listener's port: a number (0 turns it off) or `auto`. */
const metricsPort = (fallback: string) =>
  z
    .string()
    .trim()
    .default(fallback)
    .refine((value) => value === 'auto' || (/^\d{1,5}$/.test(value) && Number(value) <= 65535), 'a port (0 turns metrics off) or "auto"')
    .transform((value): number | 'auto' => (value === 'auto' ? 'auto' : Number(value)));

/** `host:port` seeds, comma-separated: a Redis Cluster's nodes to learn the rest of it from. */
const clusterSeeds = optionalString.transform((value, context) => {
  if (value === undefined) return undefined;
  const seeds: { host: string; port: number }[] = [];
  for (const seed of value.split(',').map((part) => part.trim())) {
    const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(seed);
    const port = Number(match?.[2]);
    if (!match || port < 1 || port > 65535) {
      context.addIssue({ code: 'custom', message: `"${seed}" is not host:port (comma-separated seeds, e.g. 10.0.0.1:7000,10.0.0.2:7000)` });
      return z.NEVER;
    }
    seeds.push({ host: match[1]!.replace(/^\[|\]$/g, ''), port });
  }
  return seeds;
});

const booleanFlag = (fallback: 'true' | 'false') =>
  z
    .enum(['true', 'false'])
    .default(fallback)
    .transform((value) => value === 'true');

export const configSchema = z.object({
  /** Interface the gateway listens on. */
  HOST: z.string().min(1).default('0.0.0.0'),
  /** TCP port of the gateway; 0 picks a free port (tests). */
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Let several gateways on one host share PORT (SO_REUSEPORT, the kernel balances connections); otherwise a PORT in use stops the start. */
  REUSE_PORT: booleanFlag('false'),
  /** Directory for embedded PostgreSQL data and the generated JWT key (images are stored in the database). */
  DATA_DIR: z.string().min(1).default('./data'),
  /** PostgreSQL connection string; unset means embedded PostgreSQL (PGlite) under DATA_DIR. */
  DATABASE_URL: optionalString.pipe(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
  /** Redis connection string; unset (and no REDIS_CLUSTER_NODES) means the in-process bus and job runner. */
  REDIS_URL: optionalString.pipe(z.url({ protocol: /^rediss?$/ }).optional()),
  /** Redis Cluster instead of one Redis: some of its nodes as comma-separated host:port; the bus, shard streams, leases, jobs and limits then run on the cluster (set this or REDIS_URL, not both). */
  REDIS_CLUSTER_NODES: clusterSeeds,
  /** Prefix of every Redis key, channel and BullMQ queue, so several deployments can share one Redis. */
  REDIS_PREFIX: z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9:_-]+$/, 'letters, digits, ":", "_" and "-" only')
    .default('floorcast'),
  /** E-mail of the first administrator, created on first start when there are no users. */
  ADMIN_EMAIL: z.email().default('admin@floorcast.local'),
  /** Password of the first administrator; generated and printed once when unset. */
  ADMIN_PASSWORD: optionalString
    .pipe(z.string().min(8, 'at least 8 characters').optional())
    .refine(notPlaceholder(PLACEHOLDER_PASSWORD), 'a placeholder, not a password: choose one (or leave it unset to have one generated)'),
  /** Name of the first organization created on first start. */
  ADMIN_ORGANIZATION: z.string().min(1).default('Default organization'),
  /** pino log level: fatal, error, warn, info, debug, trace or silent. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Largest JSON request body in bytes; larger bodies get 413. */
  MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
  /** Largest image upload in bytes (floorplans, pictures). */
  MAX_IMAGE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(10 * 1024 * 1024),
  /** HS256 key of access tokens (32+ characters); unset means a random key kept in DATA_DIR/jwt-secret. Set the same value on every gateway. */
  JWT_SECRET: optionalString
    .pipe(z.string().min(32, 'at least 32 characters').optional())
    .refine(notPlaceholder(PLACEHOLDER_SECRET), 'a placeholder, not a secret: use e.g. `openssl rand -base64 48`'),
  /** Lifetime of an access token in seconds (the spec says 4 days). */
  JWT_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(4 * 24 * 3600),
  /** Failed logins of one account from one client address within LOGIN_THROTTLE_WINDOW_SECONDS before further attempts get 429. */
  LOGIN_THROTTLE_MAX_FAILURES: z.coerce.number().int().min(1).default(10),
  /** Window of the failed-login throttle, in seconds. */
  LOGIN_THROTTLE_WINDOW_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .default(15 * 60),
  /** How long a job-backed request (reports, exports) may wait for its job, in milliseconds. */
  JOB_TIMEOUT_MS: z.coerce.number().int().min(100).default(120_000),
  /** Jobs the in-process runner (or one worker process) runs at once. */
  JOB_CONCURRENCY: z.coerce.number().int().min(1).default(2),
  /** Live positions older than this are left out of real-time answers and forgotten from memory. */
  LIVE_POSITION_TTL_SECONDS: z.coerce.number().int().min(1).default(300),
  /** Days of position history kept, older day partitions dropped (0 keeps everything): also the most an organization may keep zone events, stays, rollups and alarms' places (docs/api/privacy.md#retention). */
  POSITIONS_RETENTION_DAYS: z.coerce.number().int().min(0).default(365),
  /** Days of audit log kept at most; an organization may keep it shorter (0 keeps everything); unset means POSITIONS_RETENTION_DAYS. */
  AUDIT_RETENTION_DAYS: z.coerce.number().int().min(0).optional(),
  /** A WebSocket that has not authenticated within this many milliseconds is closed with 4401. */
  WS_AUTH_TIMEOUT_MS: z.coerce.number().int().min(100).default(5000),
  /** Largest WebSocket message accepted, in bytes; a larger one closes the socket with 1009 (past twice this, unread). */
  WS_MAX_MESSAGE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
  /** Past this many buffered bytes a subscriber gets only the latest position per device (alarms still all). */
  WS_COALESCE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(256 * 1024),
  /** Past this many buffered bytes a subscriber is disconnected (4008) and must resume with since_seq. */
  WS_MAX_BUFFER_BYTES: z.coerce
    .number()
    .int()
    .min(4096)
    .default(8 * 1024 * 1024),
  /** Seconds SIGTERM waits for in-flight requests (a worker: its jobs in hand) before closing anyway; the process exits at the latest a few seconds after. */
  SHUTDOWN_GRACE_SECONDS: z.coerce.number().int().min(0).default(10),
  /** Failed logins of one account from all addresses within the window before its sign-ins are slowed down (progressively; never refused). */
  LOGIN_THROTTLE_MAX_FAILURES_PER_ACCOUNT: z.coerce.number().int().min(1).default(100),
  /** Longest delay, in milliseconds, a sign-in of an account past LOGIN_THROTTLE_MAX_FAILURES_PER_ACCOUNT waits before its password is checked. */
  LOGIN_THROTTLE_MAX_DELAY_MS: z.coerce.number().int().min(0).default(10_000),
  /** Reverse proxies (addresses or CIDR ranges, comma-separated) whose X-Forwarded-For names the client; empty: none is trusted. */
  TRUSTED_PROXIES: z
    .string()
    .default('')
    .transform((value) =>
      value
        .split(',')
        .map((part) => part.trim())
        .filter((part) => part !== ''),
    )
    .refine(
      (entries) =>
        entries.every((entry) => isIP(entry.split('/')[0]!) !== 0 && (!entry.includes('/') || /^\d{1,3}$/.test(entry.split('/')[1]!))),
      'comma-separated addresses or CIDR ranges, e.g. 10.0.0.0/8,::1',
    ),
  /** Failed logins from one client address, whatever the account, within the window before it gets 429. */
  LOGIN_THROTTLE_MAX_FAILURES_PER_ADDRESS: z.coerce.number().int().min(1).default(100),
  /** Steady request budget of each API key, and of each user's password tokens, per second (an admin may set a key's own, up to RATE_LIMIT_MAX_REQUESTS_PER_SECOND). */
  RATE_LIMIT_REQUESTS_PER_SECOND: z.coerce.number().int().min(1).default(100),
  /** Requests a credential may make beyond its steady rate in a burst (refilled at the steady rate; 0: none). */
  RATE_LIMIT_BURST: z.coerce.number().int().min(0).default(200),
  /** Steady budget of uploaded positions (counted per pose) of each API key and each user's password tokens, per second. */
  RATE_LIMIT_POSES_PER_SECOND: z.coerce.number().int().min(1).default(2000),
  /** Poses a credential may upload beyond its steady rate in a burst (refilled at the steady rate; 0: none). */
  RATE_LIMIT_POSES_BURST: z.coerce.number().int().min(0).default(4000),
  /** Requests per second of one user across all their keys and tokens together (burst: twice this). */
  RATE_LIMIT_USER_REQUESTS_PER_SECOND: z.coerce.number().int().min(1).default(200),
  /** Poses per second of one user across all their keys and tokens together (burst: twice this). */
  RATE_LIMIT_USER_POSES_PER_SECOND: z.coerce.number().int().min(1).default(4000),
  /** Poses per second of one organization across all its users and keys (burst: twice this). */
  RATE_LIMIT_ORGANIZATION_POSES_PER_SECOND: z.coerce.number().int().min(1).default(20_000),
  /** Highest request rate an administrator may give one API key; a higher `requests_per_second` gets 422. */
  RATE_LIMIT_MAX_REQUESTS_PER_SECOND: z.coerce.number().int().min(1).max(1_000_000_000).default(1000),
  /** Highest pose rate an administrator may give one API key; a higher `poses_per_second` gets 422. */
  RATE_LIMIT_MAX_POSES_PER_SECOND: z.coerce.number().int().min(1).max(1_000_000_000).default(20_000),
  /** API keys one user may hold; creating one more gets 422. */
  MAX_API_KEYS_PER_USER: z.coerce.number().int().min(1).default(20),
  /** Longest a single SQL statement may run on a PostgreSQL server before it is cancelled (a request then gets 503). */
  DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  /** Longest a request waits for a PostgreSQL connection (pool slot or a new connection) before it gets 503. */
  DATABASE_ACQUIRE_TIMEOUT_MS: z.coerce.number().int().min(100).default(5000),
  /** Devices whose detector state is kept in memory; past it the least recently seen is settled (exits) and dropped. */
  DETECTION_MAX_TRACKED_DEVICES: z.coerce.number().int().min(1).default(200_000),
  /** An evacuation's roll takes every device with a fix in the building this recent (plus those whose last fix was inside). */
  EVACUATION_PRESENCE_WINDOW_S: z.coerce.number().int().min(1).default(900),
  /** A fix older than its device's newest detected one by more than this (seconds) is late: its events are flagged `late` and counted; closer ones are only reordered. */
  DETECTION_REORDER_WINDOW_SECONDS: z.coerce.number().min(0).max(60).default(2),
  /** Detections (alarms, zone events) waiting in memory for the database; past it the oldest are dropped and logged. */
  DETECTION_OUTBOX_MAX: z.coerce.number().int().min(1).default(100_000),
  /** Seconds after an alarm-button raise (danger / assistance pose) during which that device's repeats of it only count occurrences (no new alarm event). */
  ALARM_BUTTON_DEBOUNCE_S: z.coerce.number().min(0).default(10),
  /** Alarm-button raises (new alarms, and repeats past the debounce) each user and API key may cause per minute on a gateway; past it the upload gets 429. */
  ALARM_BUTTON_RAISES_PER_MINUTE: z.coerce.number().int().min(1).default(120),
  /** Topics one WebSocket may hold at once; a subscribe past it gets a 422 error frame. */
  WS_MAX_TOPICS: z.coerce.number().int().min(1).default(100),
  /** Operations (auth, subscribe, unsubscribe, upload) one WebSocket may have unanswered; past it, 429 error frames. */
  WS_MAX_IN_FLIGHT: z.coerce.number().int().min(1).default(16),
  /** Not-yet-authenticated WebSockets one remote address may hold; past it the upgrade gets 429. */
  WS_MAX_UNAUTHENTICATED_PER_ADDRESS: z.coerce.number().int().min(1).default(32),
  /** Every authenticated WebSocket's credential is checked against storage this often (a revocation whose message was lost). */
  WS_REVALIDATE_SECONDS: z.coerce.number().int().min(1).default(30),
  /** Authenticated WebSockets one user may hold on one gateway, over all credentials; past it the upgrade or auth gets 429. */
  WS_MAX_SOCKETS_PER_USER: z.coerce.number().int().min(1).default(40),
  /** Authenticated WebSockets one credential (an API key, else the user's password sessions) may hold on one gateway; past it, 429. */
  WS_MAX_SOCKETS_PER_CREDENTIAL: z.coerce.number().int().min(1).default(20),
  /** Authenticated WebSockets one remote address may hold on one gateway; past it, 429. */
  WS_MAX_SOCKETS_PER_ADDRESS: z.coerce.number().int().min(1).default(200),
  /** Past this many buffered bytes on position and geofence-event topics a subscriber is disconnected (4008); alarms keep WS_MAX_BUFFER_BYTES. */
  WS_MAX_FEED_BUFFER_BYTES: z.coerce
    .number()
    .int()
    .min(4096)
    .default(1024 * 1024),
  /** Unsent bytes over all WebSockets of a gateway; past it the sockets with the largest backlogs are closed (4008) until it is under. */
  WS_MAX_TOTAL_BACKLOG_BYTES: z.coerce
    .number()
    .int()
    .min(65536)
    .default(256 * 1024 * 1024),
  /** Live geofences one building may hold; a create past it gets 422. */
  GEOFENCES_MAX_PER_BUILDING: z.coerce.number().int().min(1).default(2000),
  /** Vertices over all live geofences of one organization (detection's cost per position); a write past it gets 422. */
  GEOFENCE_VERTICES_MAX_PER_ORGANIZATION: z.coerce.number().int().min(1).default(500_000),
  /** Devices one organization may have; an upload that would register more gets 422. */
  DEVICES_MAX_PER_ORGANIZATION: z.coerce.number().int().min(1).default(100_000),
  /** POIs one `POST /api/v1/pois_bulk` may create; a longer body gets 422. */
  POIS_BULK_MAX: z.coerce.number().int().min(1).default(1000),
  /** Longest floor, POI, POI-category or group list answered whole (a bare array); past it 422: ask by pages. */
  LIST_MAX_UNPAGED_ITEMS: z.coerce.number().int().min(1).default(10_000),
  /** Devices one upload may register (identifiers never seen before); past it the upload gets 422. */
  DEVICES_MAX_NEW_PER_UPLOAD: z.coerce.number().int().min(1).default(1000),
  /** Oldest fix an upload may carry, in seconds before now (apps upload what they buffered offline); older ones get 422. */
  POSITIONS_MAX_AGE_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(7 * 24 * 3600),
  /** Longest a gateway serves cached cartography and device owners before re-reading them, should a bus message be lost. */
  CACHE_TTL_SECONDS: z.coerce.number().int().min(1).default(60),
  /** Widest report window (to_date - from_date) in days; wider requests get 422. */
  REPORTS_MAX_WINDOW_DAYS: z.coerce.number().int().min(1).default(31),
  /** In a pseudonymous report (pseudonymize=true), place-based cells seen by fewer distinct people than this are dropped. */
  REPORTS_PSEUDONYMOUS_MIN_PEOPLE: z.coerce.number().int().min(1).default(5),
  /** A worker renews its liveness in Redis every third of this; with none renewed for this long, job-backed requests answer 503 at once and /readyz says jobs are not ready. */
  JOBS_WORKER_TTL_MS: z.coerce.number().int().min(300).default(5000),
  /** How long a job-backed request waits for Redis to take its job before answering 503 (Redis down). */
  JOBS_ENQUEUE_TIMEOUT_MS: z.coerce.number().int().min(100).default(5000),
  /** Port of the Prometheus `GET /metrics` listener (gateway and worker); 0 turns it off, `auto` picks a free port (tests). */
  METRICS_PORT: metricsPort('9464'),
  /** Port of the worker's (`npm run workers`) `GET /metrics` listener, apart from the gateway's so both run on one host; 0 turns it off, `auto` picks a free port. */
  WORKER_METRICS_PORT: metricsPort('9465'),
  /** Interface of the metrics listener; loopback by default so metrics are never public by accident (another needs METRICS_TOKEN). */
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** When set, a scrape of /metrics must send `Authorization: Bearer <token>` (else 401). */
  METRICS_TOKEN: optionalString.pipe(z.string().min(16, 'at least 16 characters').optional()),
  /** Let webhooks reach loopback, link-local, private (RFC 1918, ULA, CGNAT) and unspecified addresses (tests, closed networks). */
  WEBHOOK_ALLOW_PRIVATE_ADDRESSES: booleanFlag('false'),
  /** Longest one webhook delivery attempt may take (DNS, connect, answer) before it counts as failed. */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /** Seconds to wait before each retry of a failed delivery (jitter added); after the last one it is dead-lettered. */
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .default('5,300,1800,7200,18000,36000,36000,36000')
    .transform((value) => value.split(',').map((part) => Number(part.trim())))
    .refine(
      (delays) => delays.length >= 1 && delays.every((delay) => Number.isFinite(delay) && delay >= 0),
      'comma-separated seconds, e.g. 5,300,1800',
    ),
  /** Pending deliveries one webhook may hold; past it new events other than alarm.raised are not stored for it (counted in floorcast_webhook_deliveries_capped_total). */
  WEBHOOK_MAX_PENDING_PER_WEBHOOK: z.coerce.number().int().min(1).default(10_000),
  /** Days a dead-lettered webhook delivery is kept (for redelivery) before it is deleted. */
  WEBHOOK_DEAD_RETENTION_DAYS: z.coerce.number().int().min(1).default(14),
  /** Webhooks one organization may have; one more gets 409. */
  WEBHOOK_MAX_PER_ORGANIZATION: z.coerce.number().int().min(1).default(20),
  /** Shards the buildings are spread over for detection ownership; every gateway of a deployment must agree (change it only with all stopped). */
  CLUSTER_SHARDS: z.coerce.number().int().min(1).max(4096).default(64),
  /** A shard's live positions stay subscribed on the bus this long (ms) after the last socket here needing them left, so a topic left and followed again does not churn subscriptions. */
  BUS_INTEREST_LINGER_MS: z.coerce.number().int().min(0).default(5000),
  /** How often a gateway renews its membership and shard leases, in milliseconds. */
  CLUSTER_HEARTBEAT_MS: z.coerce.number().int().min(50).default(1000),
  /** A gateway (and its shard leases) counts as gone this long after its last heartbeat, in ms: the failover delay (3+ heartbeats). */
  CLUSTER_MEMBER_TTL_MS: z.coerce.number().int().min(150).default(3000),
  /** This gateway's member id in the cluster; unset means hostname:pid:random, new at every start. */
  CLUSTER_MEMBER_ID: optionalString.pipe(
    z
      .string()
      .regex(/^[A-Za-z0-9:._-]{1,100}$/, 'letters, digits, ":", ".", "_" and "-" only')
      .optional(),
  ),
  /** How often the report materializer keeps geofence stays (and rollups) up to date, in ms; 0 turns it off in this process. */
  REPORTS_MATERIALIZE_INTERVAL_MS: z.coerce.number().int().min(0).default(5000),
  /** How long a received position may take to commit (writer batches, retries): the materializer stays that far behind now. */
  REPORTS_MATERIALIZE_LAG_MS: z.coerce.number().int().min(0).default(30_000),
  /** Share of the time a materializer pass may be busy rebuilding (0-1]: it pauses between batches of device-hours to keep to it, so the top-of-hour rebuild does not starve ingest; 1 never pauses. */
  REPORTS_MATERIALIZE_DUTY: z.coerce.number().gt(0).max(1).default(0.5),
  /** Uploads of one organization a shard's stream may hold unacknowledged by its owner before that organization's uploads there wait; 0: never. */
  CLUSTER_MAX_BACKLOG: z.coerce.number().int().min(0).default(1000),
  /** How long an upload waits for its building's detection to catch up before it is refused with 503 and Retry-After, in ms. */
  CLUSTER_BACKLOG_WAIT_MS: z.coerce.number().int().min(0).max(60_000).default(2000),
  /** BENCH ONLY, loses data: takes one stage out of the position pipeline (`store`: nothing stored, `bus`: nothing published, `detection`: no detector runs) so a bench measures its floor; refused when NODE_ENV=production. */
  BENCH_SKIP_STAGE: z.enum(['none', 'store', 'bus', 'detection']).default('none'),
});

export type Config = z.output<typeof configSchema>;

export class ConfigError extends Error {
  constructor(readonly issues: { variable: string; message: string }[]) {
    super(`Invalid configuration:\n${issues.map((issue) => `  ${issue.variable}: ${issue.message}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses the environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const relevant: Record<string, string | undefined> = {};
  for (const key of Object.keys(configSchema.shape)) relevant[key] = env[key];
  const parsed = configSchema.safeParse(relevant);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => ({ variable: String(issue.path[0] ?? '?'), message: issue.message })));
  }
  if (parsed.data.REDIS_URL !== undefined && parsed.data.REDIS_CLUSTER_NODES !== undefined) {
    throw new ConfigError([
      { variable: 'REDIS_CLUSTER_NODES', message: 'set REDIS_URL (one Redis) or REDIS_CLUSTER_NODES (a Redis Cluster), not both' },
    ]);
  }
  if (parsed.data.BENCH_SKIP_STAGE !== 'none' && env.NODE_ENV === 'production') {
    throw new ConfigError([
      { variable: 'BENCH_SKIP_STAGE', message: 'a bench-only switch that drops positions or events: unset it in production' },
    ]);
  }
  if (!isLoopback(parsed.data.METRICS_HOST) && parsed.data.METRICS_TOKEN === undefined) {
    throw new ConfigError([
      {
        variable: 'METRICS_HOST',
        message: `${parsed.data.METRICS_HOST} is not loopback: set METRICS_TOKEN too, or anyone who reaches it reads the metrics`,
      },
    ]);
  }
  return parsed.data;
}

/** 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost: reachable from this host only. */
export function isLoopback(host: string): boolean {
  const bare = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || /^(::ffff:)?127(\.\d{1,3}){3}$/.test(bare);
}

/** The entry points' (`npm start`, `npm run workers`, `npm run demo`) reading: a bad value exits 2 naming it. */
export function loadConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
}
