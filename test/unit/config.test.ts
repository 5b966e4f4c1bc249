import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig } from '../../shared/config.js';

describe('config', () => {
  it('has a default for every setting', () => {
    const config = loadConfig({});
    expect(config.PORT).toBe(8080);
    expect(config.DATA_DIR).toBe('./data');
    expect(config.MAX_BODY_BYTES).toBe(1024 * 1024);
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.REDIS_URL).toBeUndefined();
    expect(config.JWT_SECRET).toBeUndefined();
    expect(config.JWT_TTL_SECONDS).toBe(4 * 24 * 3600);
    expect(config.REDIS_PREFIX).toBe('floorcast');
    expect(config.METRICS_PORT).toBe(9464);
    expect(config.METRICS_HOST).toBe('127.0.0.1');
    expect(config.METRICS_TOKEN).toBeUndefined();
    expect(config.WORKER_METRICS_PORT).toBe(9465); // apart from the gateway's, so both start on one host
    expect(config.REUSE_PORT).toBe(false);
    expect(config.JOBS_WORKER_TTL_MS).toBe(5000);
  });

  it('refuses a non-loopback METRICS_HOST without METRICS_TOKEN, naming METRICS_HOST', () => {
    for (const host of ['0.0.0.0', '::', '10.1.2.3', 'metrics.example']) {
      let thrown: unknown;
      try {
        loadConfig({ METRICS_HOST: host });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, host).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).issues.map((issue) => issue.variable)).toEqual(['METRICS_HOST']);
      expect((thrown as ConfigError).message).toContain('METRICS_TOKEN');
    }
    for (const host of ['127.0.0.1', '127.0.0.53', 'localhost', '::1', '[::1]'])
      expect(loadConfig({ METRICS_HOST: host }).METRICS_HOST).toBe(host);
    expect(loadConfig({ METRICS_HOST: '0.0.0.0', METRICS_TOKEN: 'a-token-of-16-chars-or-more' }).METRICS_HOST).toBe('0.0.0.0');
  });

  it('reads METRICS_PORT as a port, 0 (off) or auto (a free port, for tests)', () => {
    expect(loadConfig({ METRICS_PORT: '0' }).METRICS_PORT).toBe(0);
    expect(loadConfig({ METRICS_PORT: '9100' }).METRICS_PORT).toBe(9100);
    expect(loadConfig({ METRICS_PORT: 'auto' }).METRICS_PORT).toBe('auto');
  });

  it('reads and coerces values from the environment', () => {
    const config = loadConfig({
      PORT: '9090',
      DATABASE_URL: 'postgres://root@127.0.0.1:5432/test',
      REDIS_URL: 'redis://127.0.0.1:6379',
      MAX_BODY_BYTES: '2048',
      LOG_LEVEL: 'debug',
    });
    expect(config.PORT).toBe(9090);
    expect(config.DATABASE_URL).toBe('postgres://root@127.0.0.1:5432/test');
    expect(config.REDIS_URL).toBe('redis://127.0.0.1:6379');
    expect(config.MAX_BODY_BYTES).toBe(2048);
    expect(config.LOG_LEVEL).toBe('debug');
  });

  it('reads REDIS_CLUSTER_NODES as host:port seeds (IPv6 in brackets), and refuses it beside REDIS_URL', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: ' 10.0.0.1:7000, redis-b:7001,[::1]:7002 ' }).REDIS_CLUSTER_NODES).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-b', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
    expect(loadConfig({}).REDIS_CLUSTER_NODES).toBeUndefined();
    expect(() => loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379', REDIS_CLUSTER_NODES: '127.0.0.1:7000' })).toThrow(
      /REDIS_CLUSTER_NODES: set REDIS_URL .* or REDIS_CLUSTER_NODES .*, not both/,
    );
  });

  it('takes no pipeline stage away unless BENCH_SKIP_STAGE is set, and refuses it when NODE_ENV=production', () => {
    expect(loadConfig({}).BENCH_SKIP_STAGE).toBe('none');
    expect(loadConfig({ NODE_ENV: 'production' }).BENCH_SKIP_STAGE).toBe('none');
    expect(loadConfig({ BENCH_SKIP_STAGE: 'store' }).BENCH_SKIP_STAGE).toBe('store');
    expect(() => loadConfig({ BENCH_SKIP_STAGE: 'store', NODE_ENV: 'production' })).toThrow(/BENCH_SKIP_STAGE: a bench-only switch/);
    expect(() => loadConfig({ BENCH_SKIP_STAGE: 'everything' })).toThrow(/BENCH_SKIP_STAGE/);
  });

  it('treats empty strings as unset', () => {
    const config = loadConfig({ DATABASE_URL: '', REDIS_URL: ' ', JWT_SECRET: '' });
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.REDIS_URL).toBeUndefined();
    expect(config.JWT_SECRET).toBeUndefined();
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['DATABASE_URL', 'mysql://x@y/z'],
    ['REDIS_URL', 'not a url'],
    ['REDIS_CLUSTER_NODES', '127.0.0.1'],
    ['REDIS_CLUSTER_NODES', '127.0.0.1:7000,,127.0.0.1:7001'],
    ['REDIS_CLUSTER_NODES', 'redis://127.0.0.1:7000'],
    ['REDIS_CLUSTER_NODES', '127.0.0.1:0'],
    ['LOG_LEVEL', 'loud'],
    ['ADMIN_EMAIL', 'nobody'],
    ['ADMIN_PASSWORD', 'short'],
    ['JWT_SECRET', 'too-short'],
    ['MAX_BODY_BYTES', '-1'],
    ['REDIS_PREFIX', 'has space'],
    ['METRICS_PORT', '70000'],
    ['METRICS_PORT', 'nine'],
    ['METRICS_TOKEN', 'short'],
    ['WORKER_METRICS_PORT', 'nine'],
    ['REUSE_PORT', 'yes'],
    ['JOBS_WORKER_TTL_MS', '10'],
  ])('rejects a bad %s and names it', (variable, value) => {
    let thrown: unknown;
    try {
      loadConfig({ [variable]: value });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).issues.map((issue) => issue.variable)).toEqual([variable]);
    expect((thrown as ConfigError).message).toContain(variable);
  });

  it.each([
    ['JWT_SECRET', 'change-me-to-a-long-random-secret-of-32-chars-or-more'],
    ['JWT_SECRET', 'CHANGEME-CHANGEME-CHANGEME-CHANGEME-1'],
    ['JWT_SECRET', 'my-super-secret-jwt-key-for-production-use'],
    ['JWT_SECRET', 'an-example-value-copied-from-the-documentation'],
    ['ADMIN_PASSWORD', 'change-me-please'],
    ['ADMIN_PASSWORD', 'password'],
    ['ADMIN_PASSWORD', 'example-password'],
  ])('refuses a placeholder %s (%s) and names it', (variable, value) => {
    let thrown: unknown;
    try {
      loadConfig({ [variable]: value });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).issues.map((issue) => issue.variable)).toEqual([variable]);
  });

  it('accepts a random secret and a chosen password', () => {
    const config = loadConfig({ JWT_SECRET: 'q8Zb3vN0x7Kp2Lm9Rt4Yw6Hc1Jd5Fg0aS3eU7iO2', ADMIN_PASSWORD: 'admin-password-1' });
    expect(config.JWT_SECRET).toBe('q8Zb3vN0x7Kp2Lm9Rt4Yw6Hc1Jd5Fg0aS3eU7iO2');
    expect(config.ADMIN_PASSWORD).toBe('admin-password-1');
  });

  it('docker-compose.yml ships no secret: it requires JWT_SECRET and ADMIN_PASSWORD from the environment or a git-ignored .env', () => {
    const compose = readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');
    for (const variable of ['JWT_SECRET', 'ADMIN_PASSWORD']) {
      const line = compose.split('\n').find((text) => text.trim().startsWith(`${variable}:`));
      expect(line, variable).toMatch(new RegExp(`^\\s*${variable}: \\$\\{${variable}:\\?[^}]+\\}$`));
    }
    const ignored = readFileSync(new URL('../../.gitignore', import.meta.url), 'utf8')
      .split('\n')
      .map((line) => line.trim());
    expect(ignored).toContain('.env');
    const example = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8');
    expect(example).toMatch(/^JWT_SECRET=$/m);
    expect(example).toMatch(/^ADMIN_PASSWORD=$/m);
  });
});
