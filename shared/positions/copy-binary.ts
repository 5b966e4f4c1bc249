/**
 * Encoder for PostgreSQL's binary COPY format (`COPY ... FROM STDIN (FORMAT binary)`): the 19-byte PGCOPY header,
 * then per row an int16 field count and per field an int32 byte length (-1 for NULL) and the value in the type's
 * binary send format, then the int16 -1 trailer. Pure: it knows nothing of tables, only of values, and writes
 * them all into one growing Buffer (no Buffer per field or per row), which `finish()` hands over whole.
 *
 * It refuses what the server would refuse anyway or store differently from the text path (a non-finite float,
 * a non-integer int4, a malformed uuid), so both paths agree on what gets stored; the error is thrown before
 * anything is sent. Text is written as UTF-8 (short ASCII by hand, anything else by `Buffer.write`) and the byte
 * count actually written becomes the field's length, so whatever the string holds the stream stays well-formed
 * (a lone surrogate becomes U+FFFD; NUL bytes are refused by validation before records are built, and by the
 * server otherwise).
 */

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
/** Header: signature, int32 flags (no OIDs), int32 header-extension length. */
const HEADER_BYTES = SIGNATURE.length + 8;
/** PostgreSQL's timestamp epoch, 2000-01-01T00:00:00Z, in Unix epoch ms. */
const PG_EPOCH_MS = 946_684_800_000;
const TWO_32 = 4_294_967_296;
/** Max UTF-8 bytes per UTF-16 code unit (a surrogate pair is 2 units for 4 bytes). */
const MAX_UTF8_PER_UNIT = 3;
/** Strings up to this length are tried as ASCII by hand before falling back to `Buffer.write`. */
const SHORT_TEXT = 64;

/** Hex digit value per char code, -1 for anything else. */
const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[65 + i] = HEX[97 + i] = 10 + i;
const hexAt = (text: string, index: number): number => {
  const code = text.charCodeAt(index);
  return code < 128 ? HEX[code]! : -1;
};

export class BinaryCopyEncoder {
  private buffer: Buffer;
  /** Over `buffer`: DataView writes are inlined by V8, cheaper than Buffer's range-checked write methods. */
  private view: DataView;
  private offset = HEADER_BYTES;
  /** The last uuid written and its 16 bytes: a commit's rows mostly share their organization. */
  private lastUuid: string | undefined;
  private readonly lastUuidBytes = new Uint8Array(16);

  /** `expectedBytes`: a guess at the stream's size, so a commit's buffer rarely has to grow. */
  constructor(expectedBytes = 64 * 1024) {
    this.buffer = Buffer.allocUnsafeSlow(Math.max(expectedBytes, HEADER_BYTES + 2));
    this.view = new DataView(this.buffer.buffer, this.buffer.byteOffset, this.buffer.length);
    SIGNATURE.copy(this.buffer, 0);
    this.view.setInt32(SIGNATURE.length, 0);
    this.view.setInt32(SIGNATURE.length + 4, 0);
  }

  /** Starts a row of `fields` values; exactly that many value calls must follow. */
  row(fields: number): void {
    this.reserve(2);
    this.view.setInt16(this.offset, fields);
    this.offset += 2;
  }

  /** A uuid in its canonical text form (36 characters) or as 32 hex digits. */
  uuid(value: string | null | undefined): void {
    if (value === null || value === undefined) return this.nullField();
    this.reserve(20);
    this.view.setInt32(this.offset, 16);
    if (value !== this.lastUuid) {
      this.lastUuid = undefined; // until parsed whole: a refused uuid leaves no half-written bytes to reuse
      parseUuid(value, this.lastUuidBytes);
      this.lastUuid = value;
    }
    this.buffer.set(this.lastUuidBytes, this.offset + 4);
    this.offset += 20;
  }

  /** Text as UTF-8; the length written is the byte count actually written, so it is exact. */
  text(value: string | null | undefined): void {
    if (value === null || value === undefined) return this.nullField();
    const length = value.length;
    this.reserve(4 + length * MAX_UTF8_PER_UNIT);
    const buffer = this.buffer;
    const start = this.offset + 4;
    let bytes = 0;
    // Short ASCII (device ids, zone kinds) is copied here: a native Buffer.write costs more than the copy.
    if (length <= SHORT_TEXT) {
      while (bytes < length) {
        const code = value.charCodeAt(bytes);
        if (code > 127) break;
        buffer[start + bytes++] = code;
      }
    }
    if (bytes < length) bytes = buffer.write(value, start, 'utf8');
    this.view.setInt32(this.offset, bytes);
    this.offset = start + bytes;
  }

  int4(value: number | null | undefined): void {
    if (value === null || value === undefined) return this.nullField();
    if (!Number.isInteger(value) || value < -2_147_483_648 || value > 2_147_483_647) throw new RangeError(`not an int4: ${value}`);
    this.reserve(8);
    this.view.setInt32(this.offset, 4);
    this.view.setInt32(this.offset + 4, value);
    this.offset += 8;
  }

  bool(value: boolean | null | undefined): void {
    if (value === null || value === undefined) return this.nullField();
    this.reserve(5);
    this.view.setInt32(this.offset, 1);
    this.buffer[this.offset + 4] = value ? 1 : 0;
    this.offset += 5;
  }

  float8(value: number | null | undefined): void {
    if (value === null || value === undefined) return this.nullField();
    if (!Number.isFinite(value)) throw new RangeError(`not a finite number: ${value}`);
    this.reserve(12);
    this.view.setInt32(this.offset, 8);
    this.view.setFloat64(this.offset + 4, value);
    this.offset += 12;
  }

  /**
   * Epoch milliseconds as int64 µs since 2000-01-01, exactly for whole ms whatever the date (the product would
   * pass 2^53 as one double, so it is built from two 32-bit halves); a fraction of a ms is rounded to the µs.
   */
  timestamptz(epochMs: number | null | undefined): void {
    if (epochMs === null || epochMs === undefined) return this.nullField();
    if (!Number.isFinite(epochMs)) throw new RangeError(`not a finite time: ${epochMs}`);
    const ms = epochMs - PG_EPOCH_MS;
    const wholeMs = Math.floor(ms);
    const fractionUs = Math.round((ms - wholeMs) * 1000);
    // wholeMs = high·2^32 + low, 0 <= low < 2^32; then µs = high·1000·2^32 + (low·1000 + fraction), the last < 2^53.
    const high = Math.floor(wholeMs / TWO_32);
    const lowUs = (wholeMs - high * TWO_32) * 1000 + fractionUs;
    const carry = Math.floor(lowUs / TWO_32);
    const highWord = high * 1000 + carry;
    // Past ±2^31 the int64 would overflow: no JS date gets there, but a stray number must not wrap silently.
    if (highWord < -2_147_483_648 || highWord > 2_147_483_647) throw new RangeError(`time out of range: ${epochMs}`);
    this.reserve(12);
    this.view.setInt32(this.offset, 8);
    this.view.setInt32(this.offset + 4, highWord);
    this.view.setUint32(this.offset + 8, lowUs - carry * TWO_32);
    this.offset += 12;
  }

  /** The whole stream, trailer included; the encoder must not be used afterwards. */
  finish(): Buffer {
    this.reserve(2);
    this.view.setInt16(this.offset, -1);
    this.offset += 2;
    return this.buffer.subarray(0, this.offset);
  }

  private nullField(): void {
    this.reserve(4);
    this.view.setInt32(this.offset, -1);
    this.offset += 4;
  }

  /** Room for `bytes` more: the buffer doubles when full, so growth is amortised over the commit. */
  private reserve(bytes: number): void {
    if (this.offset + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafeSlow(Math.max(this.buffer.length * 2, this.offset + bytes));
    this.buffer.copy(grown, 0, 0, this.offset);
    this.buffer = grown;
    this.view = new DataView(grown.buffer, grown.byteOffset, grown.length);
  }
}

/** Parses a uuid's 32 hex digits (hyphens at 8, 13, 18, 23 in the 36-character form) into `into`. */
function parseUuid(value: string, into: Uint8Array): void {
  const hyphens = value.length === 36;
  if (!hyphens && value.length !== 32) throw new TypeError(`not a uuid: ${JSON.stringify(value)}`);
  let at = 0;
  for (let i = 0; i < value.length; ) {
    if (hyphens && (i === 8 || i === 13 || i === 18 || i === 23)) {
      if (value.charCodeAt(i) !== 45) throw new TypeError(`not a uuid: ${JSON.stringify(value)}`);
      i++;
      continue;
    }
    const high = hexAt(value, i);
    const low = hexAt(value, i + 1);
    if (high < 0 || low < 0) throw new TypeError(`not a uuid: ${JSON.stringify(value)}`);
    into[at++] = (high << 4) | low;
    i += 2;
  }
}
