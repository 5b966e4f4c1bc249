import { z } from 'zod';
import { AppError, TimeoutError } from '../../shared/errors.js';
import { packageVersion } from '../../shared/version.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const checkSchema = z.object({
  status: z
    .enum(['ok', 'degraded', 'failing'])
    .describe('failing (503): storage or bus out of reach; degraded (200): only the job queue is (reports and exports answer 503)'),
  checks: z.record(z.string(), z.string()),
});

/**
 * What a gateway cannot serve without. The job queue is not among them: with no worker alive, reports and exports
 * answer 503 at once, while uploads, detection, alarms and live push go on; taking every gateway out of a load
 * balancer because the workers died would stop those too.
 */
const ESSENTIAL = new Set(['storage', 'bus']);

/** Liveness, readiness and the API version. */
export function healthRoutes(services: GatewayServices) {
  return [
    defineRoute({
      method: 'GET',
      path: '/healthz',
      summary: 'Liveness: the process answers',
      tags: ['operations'],
      auth: 'public',
      response: z.object({ status: z.literal('ok') }),
      handler: () => ({ body: { status: 'ok' } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/readyz',
      summary: 'Readiness: storage and bus reachable (503 otherwise); the job queue reported, degraded (200) when it is not',
      tags: ['operations'],
      auth: 'public',
      response: checkSchema,
      handler: async () => {
        const probes = { storage: services.storage, bus: services.bus, jobs: services.jobs };
        const checks: Record<string, string> = {};
        await Promise.all(
          Object.entries(probes).map(async ([name, driver]) => {
            try {
              await withTimeout(driver.ping(), 2000);
              checks[name] = 'ok';
            } catch (error) {
              // Public: an AppError's message is written for clients; a driver's (hosts, ports, SQL) goes to the log only.
              if (error instanceof AppError) checks[name] = error.message;
              else {
                checks[name] = 'unreachable';
                services.logger.warn({ err: error, check: name }, 'readiness check failed');
              }
            }
          }),
        );
        const failing = Object.entries(checks).filter(([, value]) => value !== 'ok');
        if (failing.length === 0) return { status: 200, body: { status: 'ok', checks } };
        const essential = failing.some(([name]) => ESSENTIAL.has(name));
        return { status: essential ? 503 : 200, body: { status: essential ? 'failing' : 'degraded', checks } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/version',
      summary: 'Current API version',
      tags: ['operations'],
      auth: 'authenticated',
      response: z.object({ version: z.string() }),
      handler: () => ({ body: { version: packageVersion } }),
    }),
  ];
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError(`no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => (clearTimeout(timer), resolve(value)),
      (error) => (clearTimeout(timer), reject(error)),
    );
  });
}
