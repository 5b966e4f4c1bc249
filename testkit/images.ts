import { deflateSync } from 'node:zlib';
import type { TestClient, TestResponse } from './http-client.js';

/**
 * Tiny images built byte by byte, so the tests need no fixtures on disk and can pick any size. The PNG and
 * the lossless WebP are complete files; the JPEG is a whole baseline file (one grey, all-zero-coefficient
 * scan); the lossy and extended WebP builders write real headers around a token payload.
 */

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const byte of bytes) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const u16be = (n: number) => Buffer.from([n >> 8, n & 0xff]);
const u32be = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const u32le = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};

function pngChunk(type: string, data: Buffer): Buffer {
  const typed = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  return Buffer.concat([u32be(data.length), typed, u32be(crc32(typed))]);
}

/** A complete RGB PNG of `width` x `height` (a colour gradient, so different sizes give different bytes). */
export function pngBytes(width: number, height: number): Buffer {
  const rows: number[] = [];
  for (let y = 0; y < height; y++) {
    rows.push(0); // filter: none
    for (let x = 0; x < width; x++) rows.push((x * 40) & 0xff, (y * 40) & 0xff, 128);
  }
  const ihdr = Buffer.concat([u32be(width), u32be(height), Buffer.from([8, 2, 0, 0, 0])]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(Buffer.from(rows))),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

const segment = (marker: number, payload: Buffer) => Buffer.concat([Buffer.from([0xff, marker]), u16be(payload.length + 2), payload]);

/**
 * A baseline greyscale JPEG: JFIF, quantisation and Huffman tables with one 1-bit code each, then one scan
 * where every 8x8 block is "DC difference 0, end of block" (two 0 bits): a uniform grey picture.
 * `frameMarker` lets a test use another start-of-frame (0xc2: progressive) to check the sniffer's walk.
 */
export function jpegBytes(width: number, height: number, frameMarker = 0xc0): Buffer {
  const blocks = Math.ceil(width / 8) * Math.ceil(height / 8);
  const scan = Buffer.alloc(Math.ceil((2 * blocks) / 8), 0);
  const used = (2 * blocks) % 8;
  if (used !== 0) scan[scan.length - 1] = (1 << (8 - used)) - 1; // pad the last byte with 1 bits
  const oneCodeTable = (classAndId: number) => Buffer.concat([Buffer.from([classAndId, 1]), Buffer.alloc(15), Buffer.from([0x00])]);
  return Buffer.concat([
    Buffer.from([0xff, 0xd8]),
    segment(0xe0, Buffer.concat([Buffer.from('JFIF\0', 'latin1'), Buffer.from([1, 1, 0, 0, 1, 0, 1, 0, 0])])),
    segment(0xdb, Buffer.concat([Buffer.from([0x00]), Buffer.alloc(64, 1)])),
    segment(frameMarker, Buffer.concat([Buffer.from([8]), u16be(height), u16be(width), Buffer.from([1, 1, 0x11, 0])])),
    segment(0xc4, oneCodeTable(0x00)),
    segment(0xc4, oneCodeTable(0x10)),
    segment(0xda, Buffer.from([1, 1, 0x00, 0, 63, 0])),
    scan,
    Buffer.from([0xff, 0xd9]),
  ]);
}

function riff(chunks: Buffer[]): Buffer {
  const body = Buffer.concat([Buffer.from('WEBP', 'ascii'), ...chunks]);
  return Buffer.concat([Buffer.from('RIFF', 'ascii'), u32le(body.length), body]);
}

function webpChunk(fourcc: string, data: Buffer): Buffer {
  const padded = data.length % 2 === 1 ? Buffer.concat([data, Buffer.alloc(1)]) : data;
  return Buffer.concat([Buffer.from(fourcc, 'ascii'), u32le(data.length), padded]);
}

/** Least-significant-bit-first writer, as VP8L wants. */
class BitWriter {
  private bytes: number[] = [];
  private used = 0;
  write(value: number, bits: number): this {
    for (let i = 0; i < bits; i++) {
      if (this.used % 8 === 0) this.bytes.push(0);
      if ((value >>> i) & 1) this.bytes[this.bytes.length - 1]! |= 1 << (this.used % 8);
      this.used++;
    }
    return this;
  }
  buffer(): Buffer {
    return Buffer.from(this.bytes);
  }
}

/** The VP8L payload of a one-colour lossless picture: five single-symbol prefix codes, so pixels cost 0 bits. */
function vp8lPayload(width: number, height: number): Buffer {
  const bits = new BitWriter()
    .write(0x2f, 8)
    .write(width - 1, 14)
    .write(height - 1, 14)
    .write(1, 1)
    .write(0, 3);
  bits.write(0, 1).write(0, 1).write(0, 1); // no transform, no colour cache, no meta prefix codes
  const oneSymbol = (symbol: number) =>
    symbol < 2 ? bits.write(1, 1).write(0, 1).write(0, 1).write(symbol, 1) : bits.write(1, 1).write(0, 1).write(1, 1).write(symbol, 8);
  oneSymbol(0); // green
  oneSymbol(255); // red
  oneSymbol(0); // blue
  oneSymbol(255); // alpha
  oneSymbol(0); // distance
  return bits.buffer();
}

/** A lossless WebP (simple format, VP8L chunk). */
export const webpLosslessBytes = (width: number, height: number) => riff([webpChunk('VP8L', vp8lPayload(width, height))]);

/** An extended WebP: VP8X canvas header (24-bit sizes), then the lossless image. */
export function webpExtendedBytes(width: number, height: number): Buffer {
  const vp8x = Buffer.alloc(10);
  vp8x[0] = 0x10; // alpha flag
  vp8x.writeUIntLE(width - 1, 4, 3);
  vp8x.writeUIntLE(height - 1, 7, 3);
  return riff([webpChunk('VP8X', vp8x), webpChunk('VP8L', vp8lPayload(Math.min(width, 16384), Math.min(height, 16384)))]);
}

/** A lossy WebP: a real VP8 key-frame header (frame tag, start code, 14-bit sizes) around a token payload. */
export function webpLossyBytes(width: number, height: number): Buffer {
  const frame = Buffer.alloc(20);
  const firstPartitionSize = 10;
  const tag = (firstPartitionSize << 5) | (1 << 4); // key frame (bit 0 clear), version 0, shown
  frame.writeUIntLE(tag, 0, 3);
  frame.set([0x9d, 0x01, 0x2a], 3);
  frame.writeUInt16LE(width & 0x3fff, 6);
  frame.writeUInt16LE(height & 0x3fff, 8);
  return riff([webpChunk('VP8 ', frame)]);
}

/** The classic 1x1 transparent GIF: a real image in a format the server refuses. */
export const gifBytes = () => Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

/** A Blob of `bytes` (copied: Blob wants bytes over a plain ArrayBuffer, which a pooled Buffer may not be). */
export const blobOf = (bytes: Uint8Array, type?: string) => new Blob([new Uint8Array(bytes)], type === undefined ? {} : { type });

/** Encodes a FormData exactly as fetch would send it: the body and its `multipart/form-data; boundary=` type. */
export async function encodeForm(form: FormData): Promise<{ body: Buffer; contentType: string }> {
  const response = new Response(form);
  return { body: Buffer.from(await response.arrayBuffer()), contentType: response.headers.get('content-type')! };
}

/** Uploads `bytes` as the official client does: a multipart file part (default field `image`). */
export async function uploadImage(
  client: TestClient,
  bytes: Uint8Array,
  options: { filename?: string; type?: string; field?: string } = {},
): Promise<TestResponse> {
  const form = new FormData();
  form.append(options.field ?? 'image', blobOf(bytes, options.type ?? 'image/png'), options.filename ?? 'image.png');
  const { body, contentType } = await encodeForm(form);
  return client.request('POST', '/api/v1/images', { raw: body, headers: { 'content-type': contentType } });
}
