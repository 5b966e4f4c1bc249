import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ConflictError, NotFoundError, UnsupportedMediaTypeError, ValidationError } from '../../shared/errors.js';
import { IMAGE_TYPES, detectImageType, readImageInfo } from '../../shared/images/image-sniffer.js';
import { ImageSchema, OrganizationSchema, type Image } from '../../shared/storage/entities/index.js';
import { imageUser } from '../cartography/cartography-store.js';
import { boundaryOf, isMultipartFormData, parseMultipart, type MultipartPart } from '../http/multipart.js';
import { uuidParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

/** Largest image side and area accepted: a 16k floorplan is finer than any building needs. */
export const MAX_IMAGE_SIDE = 16_384;
export const MAX_IMAGE_PIXELS = 100_000_000;

const PATH = '/api/v1/images';
/** Field names of the file part, in order of preference: the official client sends `image`. */
const FILE_FIELDS = ['image', 'file'];

const imageResponse = z.object({
  id: z.uuid(),
  url: z.string().describe('Relative path of the image bytes (the official client prefixes its domain)'),
  content_type: z.enum(IMAGE_TYPES),
  width: z.number().int(),
  height: z.number().int(),
  size: z.number().int().describe('Bytes'),
});

const present = (image: Image): z.infer<typeof imageResponse> => ({
  id: image.id,
  url: `${PATH}/${image.id}`,
  content_type: image.contentType as z.infer<typeof imageResponse>['content_type'],
  width: image.width,
  height: image.height,
  size: image.byteSize,
});

/** Keeps the last path segment (old browsers sent full paths), without control characters, at most 255 characters. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what a stored file name must lose
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/g;

function cleanFilename(filename: string | undefined): string | null {
  const base = (filename ?? '').split(/[\\/]/).pop()!.replace(CONTROL_CHARACTERS, '').trim();
  return base === '' ? null : base.slice(0, 255);
}

function filePart(headers: Record<string, string>, body: Buffer): MultipartPart {
  const contentType = headers['content-type'];
  if (!isMultipartFormData(contentType)) {
    throw new UnsupportedMediaTypeError('Send the image as multipart/form-data, in a field named "image"');
  }
  const parts = parseMultipart(body, boundaryOf(contentType!));
  for (const field of FILE_FIELDS) {
    const part = parts.find((candidate) => candidate.name === field);
    if (part) return part;
  }
  throw new ValidationError([{ field: 'image', message: 'Required: a file part named "image" (or "file")' }]);
}

/** `If-None-Match` holds our ETag (weak or strong comparison alike, as RFC 9110 says for this header). */
function matchesEtag(ifNoneMatch: string | undefined, sha256: string): boolean {
  if (ifNoneMatch === undefined) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const bare = tag
      .trim()
      .replace(/^W\//, '')
      .replace(/^"(.*)"$/, '$1');
    return bare === '*' || bare === sha256;
  });
}

/**
 * Images for cartography (floorplans, pictures, POI category icons). The bytes are sniffed (PNG, JPEG and
 * WebP only, whatever the client declares) and stored in PostgreSQL; they never change after upload, so they
 * are served with a year-long private cache and their SHA-256 as ETag.
 */
export function imageRoutes(services: GatewayServices) {
  const { storage } = services;
  const params = z.object({ id: uuidParam });
  const headersOf = (image: Image) => ({
    etag: `"${image.sha256}"`,
    'cache-control': 'private, max-age=31536000, immutable',
    'x-content-type-options': 'nosniff',
  });

  return [
    defineRoute({
      method: 'POST',
      path: PATH,
      summary:
        'Upload an image: multipart/form-data with the file in field "image" (or "file"), optional field "rtf". PNG, JPEG or WebP, at most MAX_IMAGE_BYTES',
      tags: ['images'],
      auth: 'authenticated',
      action: 'cartography:write',
      bodyKind: 'raw',
      rawBodyDoc: {
        contentType: 'multipart/form-data',
        schema: {
          type: 'object',
          required: ['image'],
          properties: {
            image: { type: 'string', format: 'binary', description: 'PNG, JPEG or WebP (also accepted as `file`)' },
            rtf: { type: 'string' },
          },
        },
      },
      maxBodyBytes: services.config.MAX_IMAGE_BYTES,
      response: imageResponse,
      successStatus: 201,
      handler: async ({ principal, headers, rawBody, audit }) => {
        // `rtf`, which the official client may send, has no documented meaning: it is accepted and ignored.
        const part = filePart(headers, rawBody);
        if (part.data.length === 0) throw new ValidationError([{ field: part.name, message: 'The file is empty' }]);
        if (!detectImageType(part.data)) {
          throw new UnsupportedMediaTypeError('Only PNG, JPEG and WebP images are accepted (the file content is none of them)');
        }
        const info = readImageInfo(part.data);
        if (!info)
          throw new ValidationError([{ field: part.name, message: 'The image header is truncated or corrupt: no size can be read' }]);
        // The console decodes floorplans in operators' browsers: a small compressed file declaring a huge
        // canvas would be a decompression bomb there (NL4).
        if (info.width > MAX_IMAGE_SIDE || info.height > MAX_IMAGE_SIDE || info.width * info.height > MAX_IMAGE_PIXELS) {
          throw new ValidationError([
            {
              field: part.name,
              message: `At most ${MAX_IMAGE_SIDE} pixels a side and ${MAX_IMAGE_PIXELS / 1_000_000} megapixels (this one is ${info.width} × ${info.height})`,
            },
          ]);
        }
        const image = await storage.em().transactional(async (em) => {
          const image = em.create(ImageSchema, {
            id: randomUUID(),
            organization: em.getReference(OrganizationSchema, principal.organizationId),
            contentType: info.contentType,
            byteSize: part.data.length,
            width: info.width,
            height: info.height,
            sha256: createHash('sha256').update(part.data).digest('hex'),
            originalFilename: cleanFilename(part.filename),
            data: part.data,
            createdAt: new Date(),
          });
          await em.flush();
          await audit.record(em, { objectType: 'images', objectId: image.id, before: null, after: present(image) }); // metadata, not the bytes
          return image;
        });
        return { status: 201, body: present(image) };
      },
    }),
    defineRoute({
      method: 'GET',
      path: `${PATH}/:id`,
      summary: 'The image bytes, with their content type; cacheable for a year (ETag, If-None-Match answers 304)',
      tags: ['images'],
      auth: 'authenticated',
      action: 'cartography:read',
      params,
      successStatus: 200,
      rawResponseDoc: { contentType: [...IMAGE_TYPES], description: 'The image, in the media type it was uploaded as' },
      otherResponses: { 304: { description: 'Not modified (If-None-Match matched the ETag)' } },
      handler: async ({ principal, params: p, headers }) => {
        const em = storage.em();
        // `data` is lazy: a revalidation (304) is answered without reading the bytes.
        const image = await em.findOne(ImageSchema, { id: p.id, organization: principal.organizationId });
        if (!image) throw new NotFoundError('Image');
        if (matchesEtag(headers['if-none-match'], image.sha256))
          return { status: 304, headers: headersOf(image), representationLength: image.byteSize };
        await em.populate(image, ['data']);
        const { buffer, byteOffset, byteLength } = image.data;
        return { raw: Buffer.from(buffer, byteOffset, byteLength), contentType: image.contentType, headers: headersOf(image) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: `${PATH}/:id`,
      summary: 'Delete an image (409 while a floor, building or POI category uses it)',
      tags: ['images'],
      auth: 'authenticated',
      action: 'cartography:write',
      params,
      handler: async ({ principal, params: p, audit }) => {
        const use = await imageUser(storage, principal.organizationId, p.id);
        if (use) throw new ConflictError(`The image is in use (${use}); change that first`);
        await storage.em().transactional(async (em) => {
          const image = await em.findOne(ImageSchema, { id: p.id, organization: principal.organizationId });
          if (!image) throw new NotFoundError('Image');
          const before = present(image);
          const deleted = await em.nativeDelete(ImageSchema, { id: p.id, organization: principal.organizationId });
          if (deleted === 0) throw new NotFoundError('Image');
          await audit.record(em, { objectType: 'images', objectId: p.id, before, after: null });
        });
        return { status: 204 };
      },
    }),
  ];
}
