import sanitizeHtml from 'sanitize-html';
import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import { EventSchema, OrganizationSchema, type CartographyEvent, type Circle } from '../../shared/storage/entities/index.js';
import { customFieldsInput, place, positionInput } from '../cartography/placement.js';
import { eventSchema, presentEvent } from '../cartography/presenters.js';
import { idParam } from '../http/query-schemas.js';
import { resourceRoutes, type ResourceContext } from '../http/resource.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

/** Link and image schemes an event may carry: no `data:` (a link to a full-screen page), no `javascript:`. */
export const EVENT_URL_SCHEMES = ['http', 'https'] as const;

const keyword = (...words: string[]) => new RegExp(`^(?:${words.join('|')})$`, 'i');
/** A colour: #rgb(a), #rrggbb(aa), rgb()/rgba()/hsl()/hsla() of plain numbers, or a named colour. */
const colour = /^(?:#[0-9a-f]{3,8}|(?:rgb|hsl)a?\(\s*[\d.%]+(?:\s*[,\s/]\s*[\d.%]+){2,3}\s*\)|[a-z]{3,20})$/i;

/**
 * The CSS an event's HTML may keep: text formatting only. Anything that sizes or places a box (position,
 * width, z-index...) or loads something (background-image, url()) is dropped, so a text cannot cover the
 * app that shows it.
 */
export const EVENT_ALLOWED_STYLES: Record<string, RegExp[]> = {
  color: [colour],
  'background-color': [colour],
  'font-weight': [keyword('normal', 'bold', 'bolder', 'lighter', '[1-9]00')],
  'font-style': [keyword('normal', 'italic', 'oblique')],
  'text-align': [keyword('left', 'right', 'center', 'justify', 'start', 'end')],
  'text-decoration': [keyword('none', 'underline', 'overline', 'line-through')],
};

/** What survives sanitising: formatting, http(s) links and images, text-only styles; never scripts, handlers or frames. */
export const sanitiseEventHtml = (html: string) =>
  sanitizeHtml(html, {
    allowedTags: sanitizeHtml.defaults.allowedTags.concat(['img', 'h1', 'h2', 'span']),
    allowedAttributes: { a: ['href', 'title', 'target'], img: ['src', 'alt', 'width', 'height'], '*': ['class', 'style'] },
    allowedSchemes: [...EVENT_URL_SCHEMES],
    allowedSchemesByTag: {},
    allowedSchemesAppliedToAttributes: ['href', 'src', 'cite'],
    allowedStyles: { '*': EVENT_ALLOWED_STYLES },
  });

/** An event's link, opened by the app: an absolute http(s) URL (422 for `javascript:`, `data:` and the like). */
const eventUrl = z.url({ protocol: /^https?$/, error: 'an absolute http or https URL' }).max(2000);

const areaInput = positionInput.extend({ radius: z.number().positive('a trigger area needs a radius > 0') });
const eventFields = {
  building_id: z.coerce.number().int().positive(),
  name: z.string().trim().min(1).max(300),
  info: z.string().max(200_000).describe('HTML; stored as sent (info_unsafe) and sanitised (info)'),
  url: eventUrl.nullable(),
  position: areaInput,
  conversion_area: areaInput.nullable(),
  custom_fields: customFieldsInput,
};

export function eventRoutes(services: GatewayServices) {
  const { cartography, storage } = services;

  async function circle(
    { em }: ResourceContext,
    building: Parameters<typeof cartography.transformOf>[0],
    input: z.infer<typeof areaInput>,
    field: string,
  ): Promise<Circle> {
    await cartography.floorOf(em, building, input.floor_id, `${field}.floor_id`);
    return { floorId: input.floor_id, radius: input.radius, ...place(cartography.transformOf(building), input, field) };
  }

  async function apply(
    context: ResourceContext,
    event: Partial<CartographyEvent>,
    body: Partial<z.infer<z.ZodObject<typeof eventFields>>>,
  ) {
    if (body.building_id !== undefined && event.buildingId !== undefined && body.building_id !== event.buildingId) {
      throw new ValidationError([{ field: 'building_id', message: 'an event cannot move to another building' }]);
    }
    const building = await cartography.building(context.em, context.principal, body.building_id ?? event.buildingId!, 'building_id');
    event.buildingId = building.id;
    if (body.position) {
      const area = await circle(context, building, body.position, 'position');
      Object.assign(event, { floorId: area.floorId, x: area.x, y: area.y, lat: area.lat, lng: area.lng, radius: area.radius });
    }
    if (body.conversion_area !== undefined)
      event.conversion = body.conversion_area ? await circle(context, building, body.conversion_area, 'conversion_area') : null;
    if (body.name !== undefined) event.name = body.name;
    if (body.info !== undefined) {
      event.infoUnsafe = body.info;
      event.info = sanitiseEventHtml(body.info);
    }
    if (body.url !== undefined) event.url = body.url;
    if (body.custom_fields !== undefined) event.customFields = body.custom_fields;
  }

  const resource = resourceRoutes(storage, {
    noun: 'event',
    path: '/api/v1/events',
    tag: 'cartography',
    entity: EventSchema,
    idParam,
    actions: { read: 'cartography:read', write: 'cartography:write' },
    response: eventSchema,
    createBody: z.object(eventFields).partial().required({ building_id: true, name: true, position: true }),
    updateBody: z.object(eventFields).partial(),
    present: presentEvent,
    create: async (context, body) => {
      const event: Partial<CartographyEvent> = {
        organization: context.em.getReference(OrganizationSchema, context.principal.organizationId),
        info: '',
        infoUnsafe: '',
        customFields: [],
        conversion: null,
        createdAt: new Date(),
        updatedAt: new Date(),
      };
      await apply(context, event, body);
      return context.em.create(EventSchema, event, { partial: true });
    },
    update: (context, event, body) => apply(context, event, body),
    onChange: ({ principal }, event, change) =>
      cartography.announce({ organizationId: principal.organizationId, buildingId: event.buildingId, kind: 'event', id: event.id, change }),
  });

  const listOfBuilding = (path: string, hidden = false) =>
    defineRoute({
      method: 'GET',
      path,
      summary: 'Events of a building',
      tags: ['cartography'],
      auth: 'authenticated',
      action: 'cartography:read',
      hidden,
      params: z.object({ building_id: idParam }),
      response: z.array(eventSchema),
      handler: async ({ principal, params }) => {
        const em = storage.em();
        const building = await cartography.building(em, principal, params.building_id);
        return { body: (await em.find(EventSchema, { buildingId: building.id }, { orderBy: { id: 'asc' } })).map(presentEvent) };
      },
    });

  return [
    ...resource,
    listOfBuilding('/api/v1/buildings/:building_id/events'),
    listOfBuilding('/api/v1/projects/:building_id/events', true),
  ];
}
