import { describe, expect, it } from 'vitest';
import { readZip, writeZip } from '../../shared/privacy/zip.js';

describe('zip (data exports)', () => {
  it('writes entries that read back byte for byte, names in UTF-8, and the same archive for the same entries', () => {
    const entries = [
      { name: 'export.json', data: Buffer.from('{"user_id":"u"}') },
      { name: 'empty.csv', data: Buffer.alloc(0) },
      { name: 'übersicht.csv', data: Buffer.from('a,b\r\n'.repeat(20_000)) },
    ];
    const archive = writeZip(entries);
    // Deflated: the repetitive file shrinks.
    expect(archive.length).toBeLessThan(10_000);
    const files = readZip(archive);
    expect([...files.keys()]).toEqual(entries.map((entry) => entry.name));
    for (const entry of entries) expect(files.get(entry.name)!.equals(entry.data)).toBe(true);
    expect(writeZip(entries).equals(archive)).toBe(true);
  });

  it('refuses a damaged entry (its CRC no longer matches)', () => {
    const archive = writeZip([{ name: 'a.txt', data: Buffer.from('hello hello hello') }]);
    // The CRC in the central directory, after the local header (30 + name) and the data.
    const central = archive.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    archive.writeUInt32LE((archive.readUInt32LE(central + 16) ^ 1) >>> 0, central + 16);
    expect(() => readZip(archive)).toThrow(/CRC/);
  });
});
