import { Packr } from 'msgpackr';

/** Plain msgpack (no msgpackr record extension), so any msgpack library can read our frames. */
const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export type WireFormat = 'json' | 'msgpack';
export const MSGPACK_SUBPROTOCOL = 'msgpack';

export function encode(format: WireFormat, message: unknown): string | Buffer {
  return format === 'msgpack' ? packr.pack(message) : JSON.stringify(message);
}

/** Binary frames are msgpack, text frames JSON, whatever was negotiated: clients may mix while debugging. */
export function decode(data: ArrayBuffer, isBinary: boolean): unknown {
  if (isBinary) return packr.unpack(Buffer.from(data));
  return JSON.parse(Buffer.from(data).toString('utf8'));
}
