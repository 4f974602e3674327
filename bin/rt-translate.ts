#!/usr/bin/env node
/**
 * The `rt-translate` executable: the command line of `main.ts` on this process's streams,
 * environment and signals.
 */
import { main } from './main.js';
import { processIo } from './cli.js';

process.exitCode = await main(process.argv.slice(2), processIo());
