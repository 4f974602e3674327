export { startEmulator, EMULATOR_DEFAULT_API_KEY } from './server.js';
export type { EmulatorOptions, RunningEmulator } from './server.js';
export type { RealtimeFaults, RealtimeFaultControl, DropOptions } from './realtime.js';
