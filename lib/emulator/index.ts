export { startEmulator, EMULATOR_DEFAULT_API_KEY } from './server.js';
export type { EmulatorOptions, RunningEmulator } from './server.js';
export { SEGMENTATIONS } from './realtime.js';
export type { RealtimeFaults, RealtimeFaultControl, DropOptions, LastAnswer, RealtimeEmulatorOptions, Segmentation } from './realtime.js';
