import { z } from 'zod';
import { RETENTION_KINDS, type RetentionKind } from '../../shared/privacy/retention.js';
import { trackingScheduleSchema, WEEKDAYS, type TrackingSchedule } from '../../shared/privacy/tracking-schedule.js';
import { defineRoute, type RequestContext, type RouteDefinition } from '../http/route.js';
import { uuidParam } from '../http/query-schemas.js';
import { PrivacyService, type WindowSubject } from '../privacy/privacy-service.js';
import type { GatewayServices } from '../services.js';

const scheduleResponse = z.object({
  time_zone: z.string(),
  weekly: z.array(z.object({ day: z.enum(WEEKDAYS), from: z.string(), to: z.string() })),
  exceptions: z.array(z.object({ date: z.string(), ranges: z.array(z.object({ from: z.string(), to: z.string() })) })),
});
const windowResponse = z.object({
  schedule: scheduleResponse.nullable().describe('null: no window of its own (tracked always, or by the group’s)'),
  updated_at: z.iso.datetime().nullable(),
});
const erasureResponse = z.object({
  id: z.uuid(),
  organization_id: z.uuid(),
  user_id: z.uuid(),
  cause: z.enum(['request', 'user_deleted']).describe('request: asked by an admin; user_deleted: started by deleting the user'),
  from: z.iso.datetime().nullable(),
  to: z.iso.datetime().nullable(),
  status: z.enum(['queued', 'running', 'done']),
  removed: z.record(z.string(), z.number().int()).describe('Rows removed so far, per table (alarms: pseudonymized)'),
  created_at: z.iso.datetime(),
  finished_at: z.iso.datetime().nullable(),
});
const privacyResponse = z.object({
  user_id: z.uuid(),
  tracking_window: z.object({
    source: z.enum(['user', 'group', 'none']),
    schedule: scheduleResponse.nullable(),
    tracked_always: z.boolean(),
    tracked_now: z.boolean().describe('Whether positions taken now are kept (inside the window, or no window)'),
  }),
  kept: z.array(
    z.object({
      data: z.string(),
      retention_days: z.number().int().nullable().describe('The period in force for the person’s organization; null: kept until erased'),
      note: z.string(),
    }),
  ),
});

const retentionResponse = z.object(
  Object.fromEntries(RETENTION_KINDS.map((kind) => [kind, z.number().int().nullable()])) as Record<
    RetentionKind,
    z.ZodNullable<z.ZodNumber>
  >,
);
const retentionBody = z
  .object(
    Object.fromEntries(RETENTION_KINDS.map((kind) => [kind, z.number().int().min(1).max(100_000).nullable().optional()])) as Record<
      RetentionKind,
      z.ZodOptional<z.ZodNullable<z.ZodNumber>>
    >,
  )
  .strict();

const toIso = (value: string | undefined) => (value === undefined ? undefined : new Date(value).toISOString());

/**
 * Privacy (issue 32): tracking windows of users and groups, what a person can read about themself, and the
 * erasure of a person's history. The filtering itself is one step of the position pipeline (gateway/privacy).
 */
export function privacyRoutes(services: GatewayServices): RouteDefinition[] {
  const privacy = new PrivacyService(services.storage, services.trackingWindows, services.jobs, services.config);
  const windowRoutes = (kind: WindowSubject['kind']): RouteDefinition[] => {
    const path = `/api/v1/${kind}s/:id/tracking_window`;
    const read = kind === 'user' ? 'users:read' : 'groups:read';
    const write = kind === 'user' ? 'users:write' : 'groups:write';
    const params = z.object({ id: uuidParam });
    const change = async ({ principal, params, audit }: RequestContext<{ id: string }>, schedule: TrackingSchedule | null) => {
      const subject = { kind, id: params.id };
      const after = await services.storage.em().transactional(async (tx) => {
        const { before, after } = await privacy.writeWindow(tx, principal.organizationId, subject, schedule);
        await audit.record(tx, { objectType: 'tracking_windows', objectId: `${kind}:${params.id}`, before, after });
        return after;
      });
      await privacy.announce(principal.organizationId, subject);
      return after;
    };
    return [
      defineRoute({
        method: 'GET',
        path,
        summary: `The ${kind}'s tracking window: when their positions are kept`,
        tags: ['privacy'],
        auth: 'authenticated',
        action: read,
        params,
        response: windowResponse,
        handler: async ({ principal, params }) => ({ body: await privacy.readWindow(principal.organizationId, { kind, id: params.id }) }),
      }),
      defineRoute({
        method: 'PUT',
        path,
        summary: `Set the ${kind}'s tracking window: outside it, uploads are acknowledged but nothing is kept (DANGER and assistance requests always are)`,
        tags: ['privacy'],
        auth: 'authenticated',
        action: write,
        params,
        body: trackingScheduleSchema,
        response: windowResponse,
        handler: async (request) => ({ body: await change(request, request.body) }),
      }),
      defineRoute({
        method: 'DELETE',
        path,
        summary: `Remove the ${kind}'s tracking window${kind === 'user' ? ' (their group’s applies, else tracked always)' : ''}`,
        tags: ['privacy'],
        auth: 'authenticated',
        action: write,
        params,
        handler: async (request) => {
          await change(request, null);
          return {};
        },
      }),
    ];
  };
  const settingsResponse = z.object({
    reports_pseudonymous: z.boolean().describe('Every report is pseudonymous (pseudonymize=true) for everyone but admins'),
    min_people: z
      .number()
      .int()
      .describe('Place cells of fewer distinct people are dropped from pseudonymous reports (REPORTS_PSEUDONYMOUS_MIN_PEOPLE)'),
    retention_days: retentionResponse.describe(
      'Days each kind of data is kept, as the organization set them (null: the deployment’s maximum)',
    ),
    retention_max_days: retentionResponse.describe(
      'The deployment’s maximum per kind (POSITIONS_RETENTION_DAYS; the audit log AUDIT_RETENTION_DAYS); null: no limit',
    ),
  });
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/organizations/current_organization/privacy_settings',
      summary:
        "The organization's privacy settings: whether reports are pseudonymous for everyone but admins, and how long each kind of data is kept",
      tags: ['privacy'],
      auth: 'authenticated',
      action: 'organization:read',
      response: settingsResponse,
      handler: async ({ principal }) => ({ body: await privacy.settings(principal.organizationId) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/organizations/current_organization/privacy_settings',
      summary: "Set the organization's privacy settings (fields left out stay as they are)",
      tags: ['privacy'],
      auth: 'authenticated',
      action: 'privacy:configure',
      body: z
        .object({
          reports_pseudonymous: z.boolean().optional().describe('Make every report pseudonymous for everyone but admins (default false)'),
          retention_days: retentionBody
            .optional()
            .describe(
              'Days each kind of data is kept (kinds left out stay as they are; null: the deployment’s maximum); past the maximum is 422',
            ),
        })
        .strict(),
      response: settingsResponse,
      handler: async ({ principal, body, audit }) => {
        const after = await services.storage.em().transactional(async (tx) => {
          const { before, after } = await privacy.writeSettings(tx, principal.organizationId, body);
          await audit.record(tx, { objectType: 'privacy_settings', objectId: principal.organizationId, before, after });
          return after;
        });
        return { body: after };
      },
    }),
    ...windowRoutes('user'),
    ...windowRoutes('group'),
    defineRoute({
      method: 'GET',
      path: '/api/v1/users/me/privacy',
      summary: 'Your tracking window, and what is kept about you for how long',
      tags: ['privacy'],
      auth: 'authenticated',
      response: privacyResponse,
      handler: async ({ principal }) => ({ body: await privacy.privacyOf(principal.organizationId, principal.userId) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/users/:id/erasure',
      summary:
        "Erase the person's positions, zone events, stays and rollups (optionally within from..to); their alarms stay, pseudonymized",
      tags: ['privacy'],
      auth: 'authenticated',
      action: 'users:erase',
      params: z.object({ id: uuidParam }),
      body: z
        .object({
          from: z.iso.datetime({ offset: true }).optional().describe('Erase from this instant (default: the beginning)'),
          to: z.iso.datetime({ offset: true }).optional().describe('Erase up to this instant (default: now and before)'),
        })
        .strict()
        .default({}),
      response: erasureResponse,
      successStatus: 202,
      handler: async ({ principal, params, body, audit }) => {
        const request = await privacy.requestErasure(principal.organizationId, params.id, body, principal.userId, (tx, created) =>
          // The request, never the erased data.
          audit.record(tx, {
            objectType: 'erasures',
            objectId: created.id,
            before: null,
            after: { user_id: created.user_id, from: created.from, to: created.to },
          }),
        );
        return { status: 202, body: request };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/users/:id/data-export',
      summary:
        'Everything held about the person (profile, devices, positions, zone events, stays, alarms, audit entries), as JSON and CSV files in a zip: yourself, or (admins) anyone of the organization',
      tags: ['privacy'],
      auth: 'authenticated',
      params: z.object({ id: uuidParam }),
      query: z.object({
        from: z.iso.datetime({ offset: true }).optional().describe('Only data from this instant (default: all)'),
        to: z.iso.datetime({ offset: true }).optional().describe('Only data up to this instant (default: all)'),
      }),
      rawResponseDoc: {
        contentType: 'application/zip',
        description: 'export.json (what is in it) and one .json and one .csv file per kind of data; X-Export-Counts holds rows per file',
      },
      handler: async ({ principal, params, query, audit }) => {
        const range = { from: toIso(query.from), to: toIso(query.to) };
        const result = await privacy.exportData(principal, params.id, range);
        // Who took a copy of whose data is the person's to know (their next export holds it): the request, not the data.
        await services.storage
          .em()
          .transactional((tx) =>
            audit.record(tx, { objectType: 'data_exports', objectId: params.id, before: null, after: { ...range, files: result.counts } }),
          );
        return {
          raw: Buffer.from(result.zip, 'base64'),
          contentType: 'application/zip',
          headers: {
            'content-disposition': `attachment; filename="${result.filename}"`,
            'x-export-counts': JSON.stringify(result.counts),
          },
        };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/users/:id/erasures',
      summary: 'The person’s erasures, newest first (at most 100): also once the user is deleted, the erasure the deletion started',
      tags: ['privacy'],
      auth: 'authenticated',
      action: 'users:erase',
      params: z.object({ id: uuidParam }),
      response: z.array(erasureResponse),
      handler: async ({ principal, params }) => ({ body: await privacy.erasures(principal.organizationId, params.id) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/users/:id/erasure/:erasure_id',
      summary: 'An erasure’s progress and what it removed',
      tags: ['privacy'],
      auth: 'authenticated',
      action: 'users:erase',
      params: z.object({ id: uuidParam, erasure_id: uuidParam }),
      response: erasureResponse,
      handler: async ({ principal, params }) => ({ body: await privacy.erasure(principal.organizationId, params.id, params.erasure_id) }),
    }),
  ];
}
