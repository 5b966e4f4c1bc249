import type { z } from 'zod';
import type { Action } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { AuditRecorder } from '../audit/audit-log.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Raw query: repeated keys and the `name[]=` form both become arrays under `name`. */
export type RawQuery = Record<string, string | string[]>;

// biome-ignore lint/suspicious/noExplicitAny: a route's types default to its schemas' outputs; the table that holds them all cannot name one
export interface RequestContext<Params = any, Query = any, Body = any> {
  method: HttpMethod;
  /** Normalised path: no trailing slash. */
  path: string;
  params: Params;
  query: Query;
  /** The query as received (arrays folded), before validation: what a job re-validates on its side. */
  rawQuery: RawQuery;
  body: Body;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  rawBody: Buffer;
  remoteAddress: string;
  /** Present on every route whose `auth` is not `public`. */
  principal: Principal;
  /** The audit entry of this request (authenticated routes): a write records it inside its own transaction. */
  audit: AuditRecorder;
  /** Runs what follows this request's commit, logging a failure rather than failing the request (shared/errors.ts). */
  afterCommit(step: string, run: () => unknown): Promise<void>;
}

export interface Reply {
  status?: number;
  /** Serialised as JSON unless `raw` is given. */
  body?: unknown;
  raw?: Buffer | string;
  contentType?: string;
  headers?: Record<string, string>;
  /** A body produced piece by piece (CSV exports): written with backpressure, never held whole in memory. */
  stream?: AsyncIterable<string | Buffer>;
  /** For a body-less 304: the Content-Length of the representation (RFC 9110), instead of 0. */
  representationLength?: number;
}

/** Who may call a route. `public` routes skip authentication; all others need a principal. */
export type RouteAuth = 'public' | 'authenticated';

// biome-ignore lint/suspicious/noExplicitAny: a route's types default to its schemas' outputs; the table that holds them all cannot name one
export interface RouteDefinition<Params = any, Query = any, Body = any> {
  method: HttpMethod;
  /** Express-style path, `:name` for parameters. */
  path: string;
  summary: string;
  tags?: string[];
  auth: RouteAuth;
  /** A write route: refused to read-only credentials. Defaults to true for every method but GET. */
  write?: boolean;
  /**
   * A write route that leaves no audit entry, and why (position uploads are data, not configuration). Every
   * other authenticated write must record one (`request.audit.record`) in its transaction; the HTTP server
   * logs an error when a successful write did not, and test/integration/audit.test.ts lists the exemptions.
   */
  auditExempt?: string;
  /** What the caller's role must allow (see auth/permissions.ts); unset means any authenticated caller. */
  action?: Action;
  /** Positioning-only credentials may call this route (position uploads). */
  allowPositioningKey?: boolean;
  params?: z.ZodType<Params>;
  query?: z.ZodType<Query>;
  body?: z.ZodType<Body>;
  /** `raw` hands the body over unparsed (uploads); `json` (default) parses it. */
  bodyKind?: 'json' | 'raw';
  maxBodyBytes?: number;
  /** OpenAPI for a `raw` body: its media type and schema (e.g. multipart/form-data). */
  rawBodyDoc?: { contentType: string; schema: Record<string, unknown> };
  /**
   * The JSON body as documented, when `body` validates only its outline and the items are checked one by one
   * later (position uploads, bulk POIs report every bad item by index): the document shows the full item type.
   */
  bodyDoc?: z.ZodType;
  /** OpenAPI for a non-JSON success response: every media type it may have (without parameters). */
  rawResponseDoc?: { contentType: string | string[]; description: string };
  /** Documented response (OpenAPI) of `successStatus`. */
  response?: z.ZodType;
  /** The success status; default 200 when a response (JSON or raw) is declared, else 204. */
  successStatus?: number;
  /** Other answers than the success one and errors, e.g. a repeat POST's 200 beside the 201, or a 304. */
  otherResponses?: Record<number, { description: string; schema?: z.ZodType }>;
  /**
   * A public route that reads sign-in credentials itself (`POST /auth/access_tokens`): documented as needing
   * HTTP Basic or an API key.
   */
  signIn?: boolean;
  /** Not listed in the OpenAPI document (aliases kept for old clients). */
  hidden?: boolean;
  handler: (request: RequestContext<Params, Query, Body>) => Promise<Reply> | Reply;
}

/** Identity function that keeps the schemas' types flowing into the handler. */
export function defineRoute<P = unknown, Q = unknown, B = unknown>(route: RouteDefinition<P, Q, B>): RouteDefinition<P, Q, B> {
  return route;
}
