/**
 * Set up before every test file (vitest `setupFiles`): the commands a file runs keep the embedded
 * emulator's state in a temporary `XDG_STATE_HOME` of the file's own, made before its tests and
 * removed after them, so no test ever reads or writes the user's state directory, and no file
 * sees another's state.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

let dir: string | undefined;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'rt-translate-state-'));
  process.env.XDG_STATE_HOME = dir;
});

afterAll(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});
