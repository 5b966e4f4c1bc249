import { EntitySchema } from '@mikro-orm/core';
import { organizationProperty } from './common-properties.js';
import type { Organization } from './organization.entity.js';

export interface PathNode {
  id: number;
  floor_id: number;
  x: number;
  y: number;
}

export interface PathLink {
  source: number;
  target: number;
  /** Which end the link may be walked from: one-way from `source`, from `target`, or `both`. */
  origin: 'source' | 'target' | 'both';
  accessible: boolean;
  tags: string[];
}

/** The navigation graph of a building, replaced as a whole by PUT /buildings/:id/paths. */
export interface BuildingPaths {
  buildingId: number;
  organization: Organization;
  nodes: PathNode[];
  links: PathLink[];
  updatedAt: Date;
}

export const BuildingPathsSchema = new EntitySchema<BuildingPaths>({
  name: 'BuildingPaths',
  tableName: 'building_paths',
  properties: {
    buildingId: { type: 'integer', primary: true, autoincrement: false },
    organization: organizationProperty,
    nodes: { type: 'json' },
    links: { type: 'json' },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
});
