import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS: its default export is the plugin, reached through `default` under NodeNext.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (
  ajv: Ajv2020,
) => void;

/**
 * Every object schema that lists its properties is closed (`unevaluatedProperties: false`, which also sees
 * through allOf/anyOf/oneOf): a field the document does not declare fails the test, even where the document
 * itself leaves objects open.
 */
export function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (!schema || typeof schema !== 'object') return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema))
    copy[key] = key === 'properties' || key === '$defs' || key === 'patternProperties' ? mapValues(value as object) : closed(value);
  if (copy.properties && copy.additionalProperties === undefined && copy.unevaluatedProperties === undefined)
    copy.unevaluatedProperties = false;
  return copy;
}

const mapValues = (object: object) => Object.fromEntries(Object.entries(object).map(([key, value]) => [key, closed(value)]));

/** Ajv 2020 over one document (OpenAPI or AsyncAPI): schemas may `$ref` its `#/components/...`. */
export class DocumentValidator {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  private readonly cache = new Map<unknown, ValidateFunction>();

  constructor(document: { components?: unknown }) {
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: 'document', components: closed(document.components ?? {}) });
  }

  /** Errors of `value` against `schema` (one of the document's), or an empty list. */
  errors(schema: object, value: unknown): string[] {
    let validate = this.cache.get(schema);
    if (!validate) {
      const rebased = JSON.parse(JSON.stringify(closed(schema)).replaceAll('"#/components/', '"document#/components/'));
      this.cache.set(schema, (validate = this.ajv.compile(rebased)));
    }
    if (validate(value)) return [];
    return (validate.errors ?? []).map(
      (error) =>
        `${error.instancePath || '/'} ${error.message}${error.params && 'unevaluatedProperty' in error.params ? `: ${String(error.params.unevaluatedProperty)}` : ''}`,
    );
  }
}
