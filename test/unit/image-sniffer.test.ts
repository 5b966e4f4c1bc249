import { describe, expect, it } from 'vitest';
import { detectImageType, readImageInfo } from '../../shared/images/image-sniffer.js';
import { gifBytes, jpegBytes, pngBytes, webpExtendedBytes, webpLosslessBytes, webpLossyBytes } from '../../testkit/images.js';

describe('image sniffer', () => {
  it('reads PNG width and height from IHDR (not swapped)', () => {
    expect(readImageInfo(pngBytes(5, 3))).toEqual({ contentType: 'image/png', width: 5, height: 3 });
    expect(readImageInfo(pngBytes(1, 200))).toEqual({ contentType: 'image/png', width: 1, height: 200 });
  });

  it('reads JPEG sizes from the start-of-frame, walking past JFIF and the quantisation table', () => {
    expect(readImageInfo(jpegBytes(17, 9))).toEqual({ contentType: 'image/jpeg', width: 17, height: 9 });
    expect(readImageInfo(jpegBytes(640, 480, 0xc2))).toEqual({ contentType: 'image/jpeg', width: 640, height: 480 }); // progressive
    // The Huffman table marker (C4) sits in the SOF range but carries no size: it must be skipped, not read.
    const dhtFirst = jpegBytes(33, 22);
    const sof = dhtFirst.indexOf(Buffer.from([0xff, 0xc0]));
    const dht = dhtFirst.indexOf(Buffer.from([0xff, 0xc4]));
    const reordered = Buffer.concat([
      dhtFirst.subarray(0, sof),
      dhtFirst.subarray(dht, dht + 22),
      dhtFirst.subarray(sof, dht),
      dhtFirst.subarray(dht + 22),
    ]);
    expect(readImageInfo(reordered)).toEqual({ contentType: 'image/jpeg', width: 33, height: 22 });
  });

  it('reads WebP sizes from VP8L, VP8 and VP8X headers', () => {
    expect(readImageInfo(webpLosslessBytes(7, 4))).toEqual({ contentType: 'image/webp', width: 7, height: 4 });
    expect(readImageInfo(webpLosslessBytes(16384, 1))).toEqual({ contentType: 'image/webp', width: 16384, height: 1 });
    expect(readImageInfo(webpLossyBytes(640, 481))).toEqual({ contentType: 'image/webp', width: 640, height: 481 });
    expect(readImageInfo(webpExtendedBytes(70000, 3))).toEqual({ contentType: 'image/webp', width: 70000, height: 3 });
  });

  it('refuses a GIF, a text file named .png, an SVG, and empty input', () => {
    expect(detectImageType(gifBytes())).toBeUndefined();
    expect(readImageInfo(gifBytes())).toBeUndefined();
    expect(readImageInfo(Buffer.from('this is not a png, whatever its name says\n'))).toBeUndefined();
    expect(readImageInfo(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'))).toBeUndefined();
    expect(readImageInfo(Buffer.alloc(0))).toBeUndefined();
    // RIFF, but a WAV file rather than WebP.
    expect(detectImageType(Buffer.from('RIFF\x24\x00\x00\x00WAVEfmt ', 'latin1'))).toBeUndefined();
  });

  it('recognises the type from magic bytes but refuses a truncated or corrupt header', () => {
    const png = pngBytes(5, 3);
    expect(detectImageType(png.subarray(0, 8))).toBe('image/png');
    expect(readImageInfo(png.subarray(0, 20))).toBeUndefined();
    const notIhdr = Buffer.from(png);
    notIhdr.write('IDAT', 12, 'latin1');
    expect(readImageInfo(notIhdr)).toBeUndefined();
    const zeroWidth = Buffer.from(png);
    zeroWidth.writeUInt32BE(0, 16);
    expect(readImageInfo(zeroWidth)).toBeUndefined();

    const jpeg = jpegBytes(17, 9);
    expect(detectImageType(jpeg.subarray(0, 3))).toBe('image/jpeg');
    expect(readImageInfo(jpeg.subarray(0, jpeg.indexOf(Buffer.from([0xff, 0xc0])) + 6))).toBeUndefined(); // cut inside SOF
    const scanBeforeFrame = Buffer.concat([
      Buffer.from([0xff, 0xd8]),
      Buffer.from([0xff, 0xda, 0x00, 0x08, 1, 1, 0, 0, 63, 0]),
      Buffer.from([0xff, 0xd9]),
    ]);
    expect(readImageInfo(scanBeforeFrame)).toBeUndefined();
    const garbageAfterSoi = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x41, 0x42, 0x43]);
    expect(readImageInfo(garbageAfterSoi)).toBeUndefined();

    const webp = webpLossyBytes(10, 10);
    const badStartCode = Buffer.from(webp);
    badStartCode[23] = 0;
    expect(readImageInfo(badStartCode)).toBeUndefined();
    expect(readImageInfo(webpLosslessBytes(3, 3).subarray(0, 22))).toBeUndefined();
  });
});
