import { EntitySchema } from '@mikro-orm/core';
import { timestampProperties } from './common-properties.js';

/** Platform defaults have no organization and are public and read-only; organizations add their own. */
export interface PoiCategory {
  id: number;
  organizationId?: string | null;
  nameEn: string;
  nameEs: string;
  code: string;
  iconId?: string | null;
  selectedIconId?: string | null;
  public: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export const PoiCategorySchema = new EntitySchema<PoiCategory>({
  name: 'PoiCategory',
  tableName: 'poi_categories',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    organizationId: { type: 'uuid', nullable: true, fieldName: 'organization_id' },
    nameEn: { type: 'string' },
    nameEs: { type: 'string', default: '' },
    code: { type: 'string' },
    iconId: { type: 'uuid', nullable: true },
    selectedIconId: { type: 'uuid', nullable: true },
    public: { type: 'boolean', default: false },
    ...timestampProperties,
  },
});
