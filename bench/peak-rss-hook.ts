/**
 * Preloaded (`node --import`) into the processes `cli.bench.ts` starts: when the process exits,
 * its peak resident set size (kernel's high-water mark, in bytes) is written to the file that
 * `PEAK_RSS_FILE` names. Nothing else changes in the process.
 */
import { writeFileSync } from 'node:fs';

const file = process.env.PEAK_RSS_FILE;
if (file) {
  process.on('exit', () => {
    writeFileSync(file, String(process.resourceUsage().maxRSS * 1024));
  });
}
