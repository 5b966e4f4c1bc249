import { accessSync, constants, statSync } from 'node:fs';
import { tmpdir } from 'node:os';

/**
 * Where test environments keep their DATA_DIR (and the embedded template, storage-template.ts): /dev/shm when the
 * host has it, so the hundreds of embedded databases a run copies, writes and removes never wait for a disk (on
 * a busy disk, removing one took seconds); the system's temporary directory otherwise. Nothing a test asserts
 * depends on the kind of file system, as nothing depends on the disk surviving a power cut.
 */
export const scratchRoot: string = (() => {
  try {
    if (!statSync('/dev/shm').isDirectory()) return tmpdir();
    accessSync('/dev/shm', constants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
})();
