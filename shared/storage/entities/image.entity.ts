import { EntitySchema } from '@mikro-orm/core';
import type { Organization } from './organization.entity.js';

/**
 * An uploaded picture (floorplan, building picture, POI category icon). The bytes live in PostgreSQL so every
 * gateway serves them, embedded or server alike; `data` is lazy so loading the row for a 304 or a delete
 * never reads them.
 */
export interface Image {
  id: string;
  organization: Organization;
  /** Sniffed from the bytes, never the client's declared type. */
  contentType: string;
  byteSize: number;
  width: number;
  height: number;
  /** Hex SHA-256 of the bytes; also the ETag. */
  sha256: string;
  originalFilename?: string | null;
  /** A Buffer from server PostgreSQL, a plain Uint8Array from PGlite. */
  data: Uint8Array;
  createdAt: Date;
}

export const ImageSchema = new EntitySchema<Image>({
  name: 'Image',
  tableName: 'images',
  properties: {
    id: { type: 'uuid', primary: true },
    organization: { kind: 'm:1', entity: 'Organization', fieldName: 'organization_id' },
    contentType: { type: 'string' },
    byteSize: { type: 'integer' },
    width: { type: 'integer' },
    height: { type: 'integer' },
    sha256: { type: 'string' },
    originalFilename: { type: 'string', nullable: true },
    data: { type: 'blob', lazy: true },
    createdAt: { type: 'Date', onCreate: () => new Date() },
  },
});
