import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import { type AuditService, presentAudit, type AuditQuery } from '../audit/audit-service.js';
import { pageMetadata, paginated, paginationQuery, uuidParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';

const auditEntry = z.object({
  id: z.number().int(),
  at: z.iso.datetime(),
  user_id: z.string().nullable(),
  user_email: z.string().nullable(),
  via: z.string().describe('How the caller signed in: jwt (an access token; api_key_id set when minted from an API key), apikey, basic'),
  api_key_id: z.string().nullable(),
  method: z.string(),
  route: z.string().describe('The route template, e.g. /api/v1/geofences/:id'),
  object_type: z.string().describe('The collection: users, geofences, apikeys, alarms, paths...'),
  object_id: z.string().nullable(),
  before: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe('The changed fields before the write (null: created); secrets read [redacted]'),
  after: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe('The changed fields after the write (null: deleted); secrets read [redacted]'),
  address: z.string().nullable().describe('The client address the gateway saw'),
});

const filters = z.object({
  object_type: z.string().max(100).optional(),
  object_id: z.string().max(200).optional(),
  user_id: uuidParam.optional(),
  from_date: z.iso.datetime({ offset: true }).optional().describe('Inclusive'),
  to_date: z.iso.datetime({ offset: true }).optional().describe('Exclusive'),
});

function checked(query: AuditQuery): AuditQuery {
  if (query.from_date && query.to_date && new Date(query.to_date) <= new Date(query.from_date)) {
    throw new ValidationError([{ field: 'query.to_date', message: 'must be after from_date' }]);
  }
  return query;
}

/** The audit log of the caller's organization: every write through the API, newest first (admins). */
export function auditRoutes(audit: AuditService) {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/audit',
      summary: 'Audit log: who changed what, when and from where (newest first, paginated)',
      tags: ['audit'],
      auth: 'authenticated',
      action: 'audit:read',
      query: filters.extend(paginationQuery),
      response: paginated(auditEntry),
      handler: async ({ principal, query }) => {
        if (query.sort !== undefined && !/^(at|id)(,desc)?$/.test(query.sort))
          throw new ValidationError([{ field: 'query.sort', message: 'newest first only: at or at,desc' }]);
        const { rows, total } = await audit.page(principal.organizationId, checked(query), query.page, query.size);
        return { body: { data: rows.map(presentAudit), metadata: pageMetadata(query, total, rows.length) } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/audit.csv',
      summary: 'Audit log as CSV (same filters), streamed',
      tags: ['audit'],
      auth: 'authenticated',
      action: 'audit:read',
      query: filters,
      rawResponseDoc: { contentType: 'text/csv', description: 'RFC 4180 CSV with a header row, newest first; before/after as JSON' },
      handler: async ({ principal, query }) => ({
        stream: audit.csv(principal.organizationId, checked(query)),
        contentType: 'text/csv; charset=utf-8',
        headers: { 'content-disposition': `attachment; filename="audit-${new Date().toISOString().slice(0, 10)}.csv"` },
      }),
    }),
  ];
}
