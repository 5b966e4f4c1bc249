/**
 * What an uploaded file really is, from its first bytes: the declared Content-Type and the file name are the
 * client's word and are never trusted. Only the formats a browser renders safely as a plain picture are
 * recognised (no SVG: it can carry script). Dimensions come from the header alone; nothing is decoded.
 */

export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp'] as const;
export type ImageType = (typeof IMAGE_TYPES)[number];

export interface ImageInfo {
  contentType: ImageType;
  width: number;
  height: number;
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

const startsWith = (bytes: Uint8Array, prefix: readonly number[], at = 0) =>
  bytes.length >= at + prefix.length && prefix.every((byte, i) => bytes[at + i] === byte);
const ascii = (bytes: Uint8Array, at: number, text: string) =>
  startsWith(
    bytes,
    [...text].map((c) => c.charCodeAt(0)),
    at,
  );
const u16be = (b: Uint8Array, at: number) => (b[at]! << 8) | b[at + 1]!;
const u32be = (b: Uint8Array, at: number) => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
const u16le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8);
const u24le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16);

/** The format, by magic bytes only; undefined for anything but PNG, JPEG and WebP. */
export function detectImageType(bytes: Uint8Array): ImageType | undefined {
  if (startsWith(bytes, PNG_SIGNATURE)) return 'image/png';
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (ascii(bytes, 0, 'RIFF') && ascii(bytes, 8, 'WEBP')) return 'image/webp';
  return undefined;
}

type Size = { width: number; height: number } | undefined;

/** PNG: the first chunk must be IHDR (13 bytes): width and height, big-endian. */
function pngSize(b: Uint8Array): Size {
  if (b.length < 24 || u32be(b, 8) !== 13 || !ascii(b, 12, 'IHDR')) return undefined;
  return { width: u32be(b, 16), height: u32be(b, 20) };
}

/** SOFn markers carry the frame size; C4 (DHT), C8 (reserved) and CC (DAC) share the range but do not. */
const isStartOfFrame = (marker: number) => marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;

/** JPEG: walk the marker segments up to the first start-of-frame (before the scan data starts). */
function jpegSize(b: Uint8Array): Size {
  let at = 2;
  while (at + 4 <= b.length) {
    if (b[at] !== 0xff) return undefined;
    const marker = b[at + 1]!;
    if (marker === 0xff) {
      at += 1; // fill byte before a marker
      continue;
    }
    // Standalone markers (TEM, RSTn, SOI) have no length; EOI or a scan before any frame header is not a picture.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
      at += 2;
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) return undefined;
    const length = u16be(b, at + 2);
    if (length < 2) return undefined;
    if (isStartOfFrame(marker)) {
      if (length < 7 || at + 9 > b.length) return undefined;
      return { height: u16be(b, at + 5), width: u16be(b, at + 7) };
    }
    at += 2 + length;
  }
  return undefined;
}

/** WebP: the first chunk after the RIFF header is VP8 (lossy), VP8L (lossless) or VP8X (extended canvas). */
function webpSize(b: Uint8Array): Size {
  if (b.length < 30) return undefined;
  if (ascii(b, 12, 'VP8 ')) {
    // Frame tag (3 bytes, bit 0 clear on a key frame), start code 9d 01 2a, then 14-bit width and height.
    if ((b[20]! & 1) !== 0 || !startsWith(b, [0x9d, 0x01, 0x2a], 23)) return undefined;
    return { width: u16le(b, 26) & 0x3fff, height: u16le(b, 28) & 0x3fff };
  }
  if (ascii(b, 12, 'VP8L')) {
    // Signature 0x2f, then 14 bits width-1 and 14 bits height-1, least significant bit first.
    if (b[20] !== 0x2f) return undefined;
    const bits = (b[21]! | (b[22]! << 8) | (b[23]! << 16) | (b[24]! << 24)) >>> 0;
    return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (ascii(b, 12, 'VP8X')) {
    // Flags (1 byte) and 3 reserved bytes, then canvas width-1 and height-1 on 24 bits each.
    return { width: u24le(b, 24) + 1, height: u24le(b, 27) + 1 };
  }
  return undefined;
}

/**
 * Type and dimensions of an image. Undefined when the bytes are not PNG, JPEG or WebP, or when the header
 * is truncated or corrupt (a zero or unreadable size): such a file would not display anyway.
 */
export function readImageInfo(bytes: Uint8Array): ImageInfo | undefined {
  const contentType = detectImageType(bytes);
  if (!contentType) return undefined;
  const size = contentType === 'image/png' ? pngSize(bytes) : contentType === 'image/jpeg' ? jpegSize(bytes) : webpSize(bytes);
  if (!size || size.width < 1 || size.height < 1 || size.width > 0x7fffffff || size.height > 0x7fffffff) return undefined;
  return { contentType, ...size };
}
