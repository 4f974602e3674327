export * from './errors.js';
export * from './config.js';
export * from './realtime/languages.js';
