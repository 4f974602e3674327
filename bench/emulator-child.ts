/**
 * A child process of the batch bench: runs an emulator on loopback (tasks final at their second
 * status read, no time involved) so that the bench's CPU time is the client's alone. Sends
 * `{ baseUrl }` once listening; exits with its parent.
 */
import { startEmulator } from '../lib/emulator/server.js';

const emulator = await startEmulator({ port: 0, apiKeys: [process.env.BENCH_KEY ?? 'bench-key'], taskMs: 0, taskPolls: 1 });
process.send?.({ baseUrl: emulator.baseUrl });
process.on('disconnect', () => process.exit(0));
