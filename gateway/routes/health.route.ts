import { z } from 'zod';
import { AppError, ErrorCode } from '../../shared/errors.js';
import { packageVersion } from '../../shared/version.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const checkSchema = z.object({ status: z.enum(['ok', 'failing']), checks: z.record(z.string(), z.string()) });

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
      summary: 'Readiness: storage, bus and job queue reachable (503 otherwise)',
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
        const ok = Object.values(checks).every((value) => value === 'ok');
        return { status: ok ? 200 : 503, body: { status: ok ? 'ok' : 'failing', checks } };
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
    const timer = setTimeout(() => reject(new AppError(ErrorCode.Timeout, `no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => (clearTimeout(timer), resolve(value)),
      (error) => (clearTimeout(timer), reject(error)),
    );
  });
}
