/** Property definitions every cartography entity shares (EntitySchema `properties` fragments). */
export const organizationProperty = { kind: 'm:1', entity: 'Organization', fieldName: 'organization_id' } as const;
export const timestampProperties = {
  createdAt: { type: 'Date', onCreate: () => new Date() },
  updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
} as const;
export const customFieldsProperty = { type: 'json', default: '[]' } as const;

export interface CustomField {
  key: string;
  value: string;
}
