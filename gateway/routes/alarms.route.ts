import { z } from 'zod';
import { ALARM_SEVERITIES } from '../../shared/detection/alarm-severity.js';
import { ALARM_STATES, ALARM_TRANSITIONS, ALARM_TYPES, canTransition } from '../../shared/detection/alarm-states.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../../shared/errors.js';
import { BuildingSchema, type Building } from '../../shared/storage/entities/index.js';
import { listAlarms } from '../alarms/alarm-list.js';
import { BULK_MAX, bulkChangeState } from '../alarms/alarm-bulk.js';
import { AlarmEscalation } from '../alarms/alarm-escalation.js';
import { assertResolutionComment, readAlarmSettings, writeAlarmSettings } from '../alarms/alarm-settings.js';
import { latitude, longitude } from '../cartography/placement.js';
import { idParam, listParam, pageMetadata, paginated, paginationQuery, uuidParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';
import { confinedUserId, mayRaiseAlarmType, USER_ALARM_TYPES } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { AlarmHistoryEntry, AlarmView } from '../alarms/alarm-event-message.js';
import type { AlarmWriteHook } from '../alarms/alarm-service.js';
import type { EntityManager } from '@mikro-orm/postgresql';

const historyEntry = z.object({
  state: z.enum(ALARM_STATES),
  from: z.enum(ALARM_STATES).nullable(),
  at: z.string(),
  by: z.union([
    z.object({
      user_id: z.string(),
      email: z
        .string()
        .nullable()
        .describe('Null when shown to a plain user and the change was not theirs: plain users do not see colleagues’ e-mails'),
    }),
    z.literal('system'),
  ]),
  comment: z.string().nullable(),
  event: z
    .literal('escalated')
    .optional()
    .describe('An entry that changed no state: nobody confirmed the critical alarm within escalate_after_s'),
});
export const alarmSchema = z.object({
  id: z.uuid(),
  seq: z.number().int().describe('Seq of the alarm’s latest event; every raise or state change of an organization takes the next number'),
  type: z.enum(ALARM_TYPES),
  severity: z
    .enum(ALARM_SEVERITIES)
    .describe(
      'Fixed per type: critical DANGER, EMERGENCY, ASSISTANCE_REQUEST; high DEADMAN, BREACH, BUILDING_SILENT; normal GEOFENCE_MAX_STAY_TIME, STATIONARY',
    ),
  state: z.enum(ALARM_STATES),
  organization_id: z.uuid(),
  building_id: z.number().int().nullable(),
  floor_id: z.number().int().nullable(),
  device_id: z.string().nullable(),
  user_id: z.string().nullable(),
  geofence_id: z.string().nullable(),
  position: z
    .object({
      floor_id: z.number().int().nullable(),
      cartesians: z.object({ x: z.number(), y: z.number() }).nullable(),
      georeferences: z.object({ lat: z.number(), lng: z.number() }).nullable(),
    })
    .nullable(),
  details: z.record(z.string(), z.unknown()),
  occurrences: z.number().int().describe('How many times it was raised while OPEN'),
  history: z.array(historyEntry),
  contact_restored_at: z
    .string()
    .nullable()
    .describe(
      'DEADMAN: when its device reported again, while the alarm was OPEN (also in details, with contact_restored_position); null otherwise',
    ),
  occurred_at: z
    .string()
    .describe(
      'When the condition happened, in event time: the fix that showed a stay over its limit, the press of an alarm button (also in details); created_at when not recorded',
    ),
  late: z
    .boolean()
    .describe(
      'Found from fixes or a press that reached the server late (uploaded from an offline buffer): occurred_at is in the past, details.delay_ms says by how much. A max-stay alarm later fixes contradict is closed by the system with details.superseded',
    ),
  silence_evidence: z
    .object({
      count: z.number().int().describe('Fixes taken during the silence that reached the server late'),
      first_at: z.string().describe('Fix time of the first of them'),
      last_at: z.string().describe('Fix time of the last of them'),
      was_moving: z
        .boolean()
        .describe(
          'They changed floor, or two of them lie further apart than the building’s dead-man radius (deadman_radius_m, 0 when unset)',
        ),
      moved_m: z
        .number()
        .nullable()
        .describe('Greatest distance between two of them on one floor, in metres; null without floor coordinates'),
      fixes: z
        .array(
          z.object({
            at: z.string().describe('Fix time'),
            building_id: z.number().int().nullable(),
            floor_id: z.number().int().nullable(),
            x: z.number().nullable(),
            y: z.number().nullable(),
            lat: z.number(),
            lng: z.number(),
            delay_ms: z.number().describe('How long after the fix it reached the server'),
          }),
        )
        .describe('At most 50 of them, evenly spread over the silence, the first and the last included'),
    })
    .nullable()
    .describe(
      'DEADMAN for silence: positions the device buffered while it was silent and uploaded late (also in details). The alarm is not withdrawn by them (nobody saw the person then); they are evidence to close it with ("reported late: was moving"). Null when none came',
    ),
  created_at: z.string(),
  updated_at: z.string(),
});

const organizationAlarmSettingsSchema = z.object({
  escalate_after_s: z.number().int(),
  escalate_max: z.number().int(),
  comment_always: z.boolean(),
  deadman_auto_close: z.boolean(),
});

/** A filter field that takes one value or a list of them. */
const oneOrMany = <T extends z.ZodType>(item: T) =>
  z.union([item, z.array(item).min(1)]).transform((value) => (Array.isArray(value) ? value : [value]) as z.output<T>[]);

/** The audit entry of one alarm state change, written in its transaction. */
const auditedChange =
  (audit: {
    record: (tx: EntityManager, entry: { objectType: string; objectId: string; before: unknown; after: unknown }) => Promise<void>;
  }): AlarmWriteHook =>
  (tx, { event }, before) => {
    const { event: _kind, ...after } = event;
    return audit.record(tx, { objectType: 'alarms', objectId: after.id, before, after });
  };

type SeenHistoryEntry = Omit<AlarmHistoryEntry, 'by'> & { by: { user_id: string; email: string | null } | 'system' };

/**
 * An alarm as a caller may see it. A plain user sees only alarms about themself (the queries make sure of
 * that), and in their history the operators who handled them by user id only: a plain user may not list
 * users, so colleagues' e-mails are not theirs to see (their own entries keep their e-mail).
 */
export function alarmAsSeenBy<A extends Pick<AlarmView, 'history'>>(
  principal: Pick<Principal, 'role' | 'userId'>,
  alarm: A,
): Omit<A, 'history'> & { history: SeenHistoryEntry[] } {
  const confined = confinedUserId(principal);
  if (confined === undefined) return alarm;
  return {
    ...alarm,
    history: alarm.history.map((entry) =>
      entry.by === 'system' || entry.by.user_id === confined ? entry : { ...entry, by: { user_id: entry.by.user_id, email: null } },
    ),
  };
}

/** Alarms: list, read, raise (always OPEN), state changes through one transition table; building alarm settings. */
export function alarmRoutes(services: GatewayServices) {
  const { alarms, storage } = services;
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/alarms',
      summary: 'Alarms of the organization, worst first (critical, high, normal), newest first within (paginated)',
      tags: ['alarms'],
      auth: 'authenticated',
      action: 'alarms:read',
      query: z.object({
        building_id: idParam.optional(),
        state: listParam(z.enum(ALARM_STATES)).optional(),
        type: listParam(z.enum(ALARM_TYPES)).optional(),
        severity: listParam(z.enum(ALARM_SEVERITIES)).optional().describe('critical, high and/or normal'),
        device_id: z.string().optional(),
        user_id: uuidParam.optional(),
        from_date: z.iso.datetime({ offset: true }).optional(),
        to_date: z.iso.datetime({ offset: true }).optional(),
        ...paginationQuery,
      }),
      response: paginated(alarmSchema),
      handler: async ({ principal, query }) => {
        const { alarms: page, total } = await listAlarms(storage, principal, query);
        return { body: { data: page.map((alarm) => alarmAsSeenBy(principal, alarm)), metadata: pageMetadata(query, total, page.length) } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/alarms/:id',
      summary: 'One alarm, with the history of its state changes',
      tags: ['alarms'],
      auth: 'authenticated',
      action: 'alarms:read',
      params: z.object({ id: uuidParam }),
      response: alarmSchema,
      handler: async ({ principal, params }) => {
        const alarm = await alarms.get(principal.organizationId, params.id);
        const confined = confinedUserId(principal);
        if (confined !== undefined && alarm.user_id !== confined) throw new ForbiddenError('Not an alarm about you');
        return { body: alarmAsSeenBy(principal, alarm) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/alarms',
      summary: 'Raise an alarm (always OPEN; a repeat of an OPEN one of the same device and kind updates it)',
      tags: ['alarms'],
      auth: 'authenticated',
      action: 'alarms:raise',
      body: z.object({
        type: z
          .enum(ALARM_TYPES)
          .describe(
            `${USER_ALARM_TYPES.join(' and ')} only: every other type is raised by the system alone (403); BREACH, EMERGENCY and STATIONARY are not to be used (spec 2.11)`,
          ),
        device_id: z.string().min(1).max(200).optional().describe('A plain user may name only a device assigned to them'),
        user_id: z.uuid().optional().describe('Whom the alarm is about; a plain user may name only themself (the default for them)'),
        building_id: z.coerce.number().int().positive().optional(),
        floor_id: z.coerce.number().int().positive().optional(),
        geofence_id: z.uuid().optional(),
        x: z.number().finite().optional(),
        y: z.number().finite().optional(),
        lat: latitude.optional(),
        lng: longitude.optional(),
        comment: z.string().max(2000).optional(),
      }),
      response: alarmSchema,
      successStatus: 201,
      otherResponses: {
        200: { description: 'A repeat of an OPEN alarm of the same device and kind: that alarm, updated', schema: alarmSchema },
      },
      handler: async ({ principal, body, audit }) => {
        // A forged system alarm would be the OPEN one a later real one merges into (one OPEN per device, kind and
        // geofence), so system types are refused to every caller, not only to plain users.
        if (!mayRaiseAlarmType(principal.role, body.type)) throw new ForbiddenError(`Only the system raises ${body.type} alarms`);
        const confined = confinedUserId(principal);
        if (confined !== undefined && body.user_id !== undefined && body.user_id !== confined)
          throw new ForbiddenError('You may only raise alarms about yourself');
        // Whom the alarm is about must be someone of this organization (L2): another tenant's user is no one here.
        if (body.user_id !== undefined && !(await alarms.isMember(principal.organizationId, body.user_id))) {
          throw new ValidationError([{ field: 'user_id', message: 'no such user in your organization' }]);
        }
        // An alarm about a device is about its owner (so the owner sees it), unless the caller names someone.
        const owner = body.device_id === undefined ? null : await alarms.deviceOwner(principal.organizationId, body.device_id);
        if (confined !== undefined && body.device_id !== undefined && owner !== confined)
          throw new ForbiddenError('You may only raise alarms about your own devices');
        let { x, y, lat, lng } = body;
        if (body.building_id !== undefined) {
          const building = await services.registry.get(principal.organizationId, body.building_id);
          if (!building) throw new ValidationError([{ field: 'building_id', message: 'no such building in your organization' }]);
          if (body.floor_id !== undefined && !building.floors.has(body.floor_id))
            throw new ValidationError([{ field: 'floor_id', message: `no floor ${body.floor_id} in building ${body.building_id}` }]);
          if (x !== undefined && y !== undefined && lat === undefined) ({ lat, lng } = building.transform.toGeo({ x, y }));
          else if (lat !== undefined && lng !== undefined && x === undefined) ({ x, y } = building.transform.toCartesian({ lat, lng }));
        }
        const message = await alarms.raise(
          {
            organizationId: principal.organizationId,
            type: body.type,
            deviceId: body.device_id ?? null,
            userId: body.user_id ?? owner ?? confined ?? null,
            buildingId: body.building_id ?? null,
            floorId: body.floor_id ?? null,
            geofenceId: body.geofence_id ?? null,
            x: x ?? null,
            y: y ?? null,
            lat: lat ?? null,
            lng: lng ?? null,
            details: { source: 'api' },
            comment: body.comment ?? null,
            by: { user_id: principal.userId, email: principal.email },
          },
          (tx, { event }) => {
            const { event: kind, ...alarm } = event;
            // A repeat of an OPEN alarm only counts one more occurrence (and fills in what was unknown).
            const [before, after] =
              kind === 'raised' ? [null, alarm] : [{ occurrences: alarm.occurrences - 1 }, { occurrences: alarm.occurrences }];
            return audit.record(tx, { objectType: 'alarms', objectId: alarm.id, before, after });
          },
        );
        const { event: _kind, ...alarm } = message.event;
        return { status: message.event.event === 'raised' ? 201 : 200, body: alarmAsSeenBy(principal, alarm) };
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: '/api/v1/alarms/:id',
      summary: `Change an alarm's state: ${Object.entries(ALARM_TRANSITIONS)
        .map(([from, to]) => `${from} -> ${to.length ? to.join('|') : '(final)'}`)
        .join(
          '; ',
        )}. 409 for any other move. CLOSED or MARKED_FALSE needs a comment for a critical or high alarm (for every alarm when the organization's comment_always is set): 422 naming comment`,
      tags: ['alarms'],
      auth: 'authenticated',
      action: 'alarms:manage',
      params: z.object({ id: uuidParam }),
      body: z.object({ state: z.enum(ALARM_STATES), comment: z.string().max(2000).optional() }),
      response: alarmSchema,
      handler: async ({ principal, params, body, audit }) => {
        const current = await alarms.get(principal.organizationId, params.id);
        // A move the table refuses stays a 409, comment or not.
        if (canTransition(current.state, body.state))
          assertResolutionComment(current.type, body.state, body.comment, await readAlarmSettings(storage, principal.organizationId));
        const by = { user_id: principal.userId, email: principal.email };
        const message = await alarms.changeState(
          principal.organizationId,
          params.id,
          body.state,
          body.comment ?? null,
          by,
          auditedChange(audit),
        );
        const { event: _kind, ...alarm } = message.event;
        return { body: alarm };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/alarms/bulk',
      summary: `Change the state of many alarms at once, named by ids and/or a filter (at most ${BULK_MAX}; 422 past it). Each change is a PATCH's: its own seq, event, push, webhook and audit entry; alarms that cannot make the move are skipped`,
      tags: ['alarms'],
      auth: 'authenticated',
      action: 'alarms:manage',
      body: z.object({
        ids: z.array(z.uuid()).min(1).max(BULK_MAX).optional(),
        filter: z
          .object({
            type: oneOrMany(z.enum(ALARM_TYPES)).optional(),
            severity: oneOrMany(z.enum(ALARM_SEVERITIES)).optional(),
            building_id: z.number().int().positive().optional(),
            state: oneOrMany(z.enum(ALARM_STATES)).optional(),
            from_date: z.iso.datetime({ offset: true }).optional(),
            to_date: z.iso.datetime({ offset: true }).optional(),
          })
          .strict()
          .optional()
          .describe('Alarms created in [from_date, to_date) of these types, severities, states and building; with ids, both must hold'),
        state: z.enum(ALARM_STATES),
        comment: z.string().max(2000).optional().describe('One comment for every change; needed as for PATCH'),
      }),
      response: z.object({
        matched: z.number().int(),
        changed: z.number().int().describe('How many alarms changed state'),
        changed_ids: z.array(z.uuid()),
        skipped: z.array(z.object({ id: z.uuid(), state: z.enum(ALARM_STATES), reason: z.string() })),
      }),
      handler: async ({ principal, body, audit }) => {
        const by = { user_id: principal.userId, email: principal.email };
        const result = await bulkChangeState(
          alarms,
          storage,
          { organizationId: principal.organizationId, confinedUserId: confinedUserId(principal) },
          body,
          by,
          auditedChange(audit),
        );
        return { body: result };
      },
    }),
    ...['GET', 'PUT'].map((method) =>
      defineRoute({
        method: method as 'GET' | 'PUT',
        path: '/api/v1/organizations/current_organization/alarm_settings',
        summary:
          method === 'GET'
            ? "The organization's alarm policy: escalation, resolution comments, closing a DEADMAN on contact"
            : "Set the organization's alarm policy (fields left out stay as they are)",
        tags: ['alarms'],
        auth: 'authenticated',
        action: method === 'GET' ? 'alarms:read' : 'alarms:configure',
        body:
          method === 'PUT'
            ? z
                .object({
                  escalate_after_s: z
                    .number()
                    .int()
                    .positive()
                    .max(86_400)
                    .optional()
                    .describe('An OPEN critical alarm nobody confirmed for this long escalates, then again every as long (default 60)'),
                  escalate_max: z
                    .number()
                    .int()
                    .min(0)
                    .max(100)
                    .optional()
                    .describe('Escalations of one alarm at most; 0 switches escalation off (default 3)'),
                  comment_always: z
                    .boolean()
                    .optional()
                    .describe('Closing or marking false any alarm needs a comment, not only a critical or high one (default false)'),
                  deadman_auto_close: z
                    .boolean()
                    .optional()
                    .describe('An OPEN DEADMAN is closed by the system when its device reports again (default false: a person confirms)'),
                })
                .strict()
            : undefined,
        response: organizationAlarmSettingsSchema,
        handler: async ({ principal, body, audit }) => {
          if (method === 'GET') return { body: await readAlarmSettings(storage, principal.organizationId) };
          const after = await storage.em().transactional(async (tx) => {
            const { before, after } = await writeAlarmSettings(
              tx,
              principal.organizationId,
              body as Parameters<typeof writeAlarmSettings>[2],
            );
            if (before.escalate_after_s !== after.escalate_after_s || before.escalate_max !== after.escalate_max)
              await AlarmEscalation.reschedule(tx, principal.organizationId);
            await audit.record(tx, { objectType: 'alarm_settings', objectId: principal.organizationId, before, after });
            return after;
          });
          return { body: after };
        },
      }),
    ),
    ...['GET', 'PUT'].map((method) =>
      defineRoute({
        method: method as 'GET' | 'PUT',
        path: '/api/v1/buildings/:id/alarm_settings',
        summary:
          method === 'GET'
            ? 'Dead-man and silence-storm thresholds of a building'
            : 'Set the dead-man and silence-storm thresholds of a building (null switches a dead-man condition off, or takes the storm default)',
        tags: ['alarms'],
        auth: 'authenticated',
        action: method === 'GET' ? 'alarms:read' : 'cartography:write',
        params: z.object({ id: idParam }),
        body:
          method === 'PUT'
            ? z.object({
                deadman_after_s: z.number().int().positive().nullable().optional().describe('Still for longer than this raises DEADMAN'),
                deadman_radius_m: z.number().positive().nullable().optional().describe('Moving less than this counts as still'),
                deadman_silence_s: z
                  .number()
                  .int()
                  .positive()
                  .nullable()
                  .optional()
                  .describe('Silent for longer than this, after being in the building, raises DEADMAN'),
                storm_share: z
                  .number()
                  .min(0)
                  .max(1)
                  .nullable()
                  .optional()
                  .describe(
                    'More than this share of the recently active devices silent together raises one BUILDING_SILENT instead of a DEADMAN each (null: 0.5)',
                  ),
                storm_min_devices: z.number().int().min(0).nullable().optional().describe('...and at least this many of them (null: 5)'),
              })
            : undefined,
        response: z.object({
          building_id: z.number().int(),
          deadman_after_s: z.number().nullable(),
          deadman_radius_m: z.number().nullable(),
          deadman_silence_s: z.number().nullable(),
          storm_share: z.number().nullable(),
          storm_min_devices: z.number().int().nullable(),
        }),
        handler: async ({ principal, params, body, audit }) => {
          const present = (building: Building) => ({
            building_id: building.id,
            deadman_after_s: building.deadmanAfterS ?? null,
            deadman_radius_m: building.deadmanRadiusM ?? null,
            deadman_silence_s: building.deadmanSilenceS ?? null,
            storm_share: building.stormShare ?? null,
            storm_min_devices: building.stormMinDevices ?? null,
          });
          const find = async (em: ReturnType<typeof storage.em>) => {
            const building = await em.findOne(BuildingSchema, { id: params.id, organization: principal.organizationId });
            if (!building) throw new NotFoundError('Building');
            return building;
          };
          if (method === 'GET') return { body: present(await find(storage.em())) };
          const after = await storage.em().transactional(async (em) => {
            const building = await find(em);
            const before = present(building);
            const settings = body as {
              deadman_after_s?: number | null;
              deadman_radius_m?: number | null;
              deadman_silence_s?: number | null;
              storm_share?: number | null;
              storm_min_devices?: number | null;
            };
            if (settings.deadman_after_s !== undefined) building.deadmanAfterS = settings.deadman_after_s;
            if (settings.deadman_radius_m !== undefined) building.deadmanRadiusM = settings.deadman_radius_m;
            if (settings.deadman_silence_s !== undefined) building.deadmanSilenceS = settings.deadman_silence_s;
            if (settings.storm_share !== undefined) building.stormShare = settings.storm_share;
            if (settings.storm_min_devices !== undefined) building.stormMinDevices = settings.storm_min_devices;
            await em.flush();
            await audit.record(em, { objectType: 'alarm_settings', objectId: building.id, before, after: present(building) });
            return present(building);
          });
          await services.cartography.announce({
            organizationId: principal.organizationId,
            buildingId: params.id,
            kind: 'building',
            id: params.id,
            change: 'updated',
          });
          return { body: after };
        },
      }),
    ),
  ];
}
