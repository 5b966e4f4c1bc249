import { accessSync, constants, statSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';

/** Below this much free space (a container's default /dev/shm is 64 MB), /dev/shm is not used. */
const MIN_FREE_BYTES = 2 * 1024 ** 3;

/**
 * Where test environments keep their DATA_DIR (and the embedded template, storage-template.ts): /dev/shm when the
 * host has it with room to spare, so the hundreds of embedded databases a run copies, writes and removes never
 * wait for a disk (on a busy disk, removing one took seconds); the system's temporary directory otherwise.
 * Nothing a test asserts depends on the kind of file system, as nothing depends on the disk surviving a power cut.
 */
export const scratchRoot: string = (() => {
  try {
    if (!statSync('/dev/shm').isDirectory()) return tmpdir();
    accessSync('/dev/shm', constants.W_OK);
    const { bavail, bsize } = statfsSync('/dev/shm');
    return bavail * bsize >= MIN_FREE_BYTES ? '/dev/shm' : tmpdir();
  } catch {
    return tmpdir();
  }
})();
