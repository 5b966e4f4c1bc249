import { Packr, addExtension } from 'msgpackr';
import { POSITIONS_EXTENSION_TYPE, PositionsMessage, positionsFromColumns, positionsToColumns } from '../positions/positions-message.js';

/**
 * How the bus encodes payloads on the wire, and whoever stores the same bytes elsewhere (the shard streams of
 * gateway/cluster) with it. The bus is internal to Floorcast, so it uses msgpackr's record extension: a batch of
 * positions names its keys once, not once per position (about half the bytes and a third of the decoding time
 * of plain maps). Each message carries its own record definitions, so any reader decodes any message alone.
 * A batch of positions, the bulk of the traffic, goes by columns (an extension): cheaper still, both ways.
 */
const codec = new Packr({ useRecords: true });
addExtension({ Class: PositionsMessage, type: POSITIONS_EXTENSION_TYPE, write: positionsToColumns, read: positionsFromColumns });

export const decodePayload = (bytes: Buffer): unknown => codec.unpack(bytes);

/**
 * A payload whose encoding is shared: the first to need its bytes (the Redis bus when publishing it, a shard
 * log when appending it) packs it, and every later user gets the same bytes instead of packing it again.
 * Local subscribers get `value` itself, never a decoded copy; in process (the local bus) it is never packed.
 */
export class EncodedPayload<T = unknown> {
  private packed?: Buffer;

  constructor(readonly value: T) {}

  /** The msgpack bytes of `value` as it was when first asked for: treat `value` as frozen once published. */
  get bytes(): Buffer {
    return (this.packed ??= codec.pack(this.value));
  }
}

/** The bytes of any payload, packed once if it is an `EncodedPayload`. */
export const encodePayload = (payload: unknown): Buffer => (payload instanceof EncodedPayload ? payload.bytes : codec.pack(payload));

/** What local subscribers get for a payload: the value itself. */
export const payloadValue = (payload: unknown): unknown => (payload instanceof EncodedPayload ? payload.value : payload);
