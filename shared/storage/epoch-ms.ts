/**
 * SQL for the epoch milliseconds of a timestamptz `column`, exactly: stored times are whole milliseconds (see
 * shared/positions/position-store.ts), and reading them this way gives back the numbers that were written. The
 * detector state's rebuild, the late path, a silence's evidence and a trail all compare fix times read with it.
 */
export const epochMs = (column: string) => `round(extract(epoch from ${column}) * 1000)::float8`;
