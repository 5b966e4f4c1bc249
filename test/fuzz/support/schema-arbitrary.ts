import fc from 'fast-check';
import { NO_NUL_PATTERN } from '../../../gateway/http/openapi.js';

/** A JSON Schema (draft 2020-12) as zod writes it into the OpenAPI document. */
export type JsonSchema = Record<string, any>;

/**
 * A reference to a row of the seeded world (the venue's building, a floor, a victim user...), resolved to its
 * real id only when the request is sent. Generated values stay the same from one run to the next whatever ids
 * the database hands out, so a seed reproduces the same requests.
 */
export class SeededRef {
  constructor(readonly kind: SeededKind) {}
  toJSON(): string {
    return `<${this.kind}>`;
  }
}
export type SeededKind =
  | 'building'
  | 'floor'
  | 'user'
  | 'group'
  | 'device'
  | 'poi'
  | 'poiCategory'
  | 'event'
  | 'geofence'
  | 'infrastructure'
  | 'alarm'
  | 'image'
  | 'apikey'
  | 'organization';

/**
 * JSON text sent as is: nesting deeper than the test's own JSON.stringify could handle, and numbers JSON.parse
 * turns into Infinity or -0 (`1e400`, `-0`), which no JavaScript value serialises to.
 */
export class RawJson {
  constructor(
    readonly text: string,
    readonly label: string,
  ) {}
  toJSON(): string {
    return `<raw ${this.label}>`;
  }
}

/** Body, query and path fields whose valid value is the id of a seeded row. */
const REF_FIELDS: Record<string, SeededKind> = {
  building_id: 'building',
  building_ids: 'building',
  floor_id: 'floor',
  floor_ids: 'floor',
  level_id: 'floor',
  user_id: 'user',
  user_ids: 'user',
  group_ids: 'group',
  category_id: 'poiCategory',
  map_id: 'image',
  picture_id: 'image',
  fence_ids: 'geofence',
  geofence_id: 'geofence',
  organization_id: 'organization',
};

const MAX_DEPTH = 6;

const pickNumberBound = (schema: JsonSchema, fallbackMin: number, fallbackMax: number) => {
  let min = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum : fallbackMin);
  let max = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum : fallbackMax);
  // Valid-looking values stay physically plausible: extremes are the mutations' job.
  min = Math.max(min, fallbackMin);
  max = Math.min(max, fallbackMax);
  if (min > max) [min, max] = [schema.minimum ?? schema.exclusiveMinimum ?? min, schema.maximum ?? schema.exclusiveMaximum ?? max];
  return { min, max, exclusiveMin: schema.minimum === undefined && schema.exclusiveMinimum !== undefined };
};

function stringArbitrary(schema: JsonSchema): fc.Arbitrary<string> {
  switch (schema.format) {
    case 'uuid':
      return fc.uuid();
    case 'email':
      return fc.emailAddress();
    case 'date-time':
      return fc.date({ min: new Date('2020-01-01'), max: new Date('2030-01-01'), noInvalidDate: true }).map((date) => date.toISOString());
    case 'uri':
      return fc.webUrl();
  }
  const minLength = schema.minLength ?? 0;
  const maxLength = Math.max(minLength, Math.min(schema.maxLength ?? 24, 24));
  // Free text whose only pattern refuses NUL: the printable strings below never hold one.
  if (schema.pattern && schema.pattern !== NO_NUL_PATTERN) {
    try {
      const pattern = new RegExp(schema.pattern);
      return fc.stringMatching(pattern).filter((value) => value.length >= minLength && value.length <= (schema.maxLength ?? Infinity));
    } catch {
      // A pattern JavaScript cannot compile: plain strings are as good a start for mutation.
    }
  }
  return fc.string({ minLength, maxLength });
}

/**
 * Values that satisfy `schema` (most of the time: patterns and cross-field rules are best effort). They are the
 * starting point the mutations break in one place, so a request reaches the check it is meant to probe.
 */
export function validValue(schema: JsonSchema | boolean | undefined, field?: string, depth = 0): fc.Arbitrary<unknown> {
  if (schema === undefined || schema === true || (typeof schema === 'object' && Object.keys(schema).length === 0)) {
    return depth >= MAX_DEPTH ? fc.constant(null) : fc.jsonValue({ maxDepth: 2 });
  }
  if (schema === false) return fc.constant(null);
  const ref = field !== undefined ? REF_FIELDS[field] : undefined;
  const plain = schemaValue(schema, depth);
  if (!ref) return plain;
  const reference = fc.constant(new SeededRef(ref));
  const isArray = schema.type === 'array' || (schema.anyOf ?? []).some((option: JsonSchema) => option.type === 'array');
  return fc.oneof({ weight: 3, arbitrary: isArray ? fc.constant([new SeededRef(ref)]) : reference }, { weight: 1, arbitrary: plain });
}

function schemaValue(schema: JsonSchema, depth: number): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  const options = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(options)) return fc.oneof(...options.map((option: JsonSchema) => validValue(option, undefined, depth)));
  if (Array.isArray(schema.type)) return fc.oneof(...schema.type.map((type: string) => validValue({ ...schema, type }, undefined, depth)));
  switch (schema.type) {
    case 'string':
      return stringArbitrary(schema);
    case 'integer': {
      const { min, max, exclusiveMin } = pickNumberBound(schema, -1000, 100_000);
      return fc.integer({ min: Math.ceil(exclusiveMin ? min + 1 : min), max: Math.floor(max) });
    }
    case 'number': {
      const { min, max, exclusiveMin } = pickNumberBound(schema, -500, 500);
      return fc
        .double({ min, max, minExcluded: exclusiveMin, noNaN: true, noDefaultInfinity: true })
        .map((value) => (Object.is(value, -0) ? 0 : value));
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      if (depth >= MAX_DEPTH) return fc.constant([]);
      if (Array.isArray(schema.prefixItems))
        return fc.tuple(...schema.prefixItems.map((item: JsonSchema) => validValue(item, undefined, depth + 1)));
      const minLength = schema.minItems ?? 0;
      return fc.array(validValue(schema.items, undefined, depth + 1), {
        minLength,
        maxLength: Math.max(minLength, Math.min(schema.maxItems ?? 3, 3)),
      });
    }
    default: {
      if (!schema.properties)
        return depth >= MAX_DEPTH
          ? fc.constant({})
          : fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 });
      if (depth >= MAX_DEPTH) return fc.constant({});
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, property] of Object.entries<JsonSchema>(schema.properties)) model[name] = validValue(property, name, depth + 1);
      return fc.record(model, { requiredKeys: schema.required ?? [] });
    }
  }
}
