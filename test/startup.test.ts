/**
 * Start-up: what a process loads to import the library or run a command. Codecs,
 * WebAssembly, the emulator and the other commands' modules load only when used, so
 * `--version` costs little more than Node itself and importing the library stays quick.
 * Measured on the built files (`npm run build` first, as npm test does), in a fresh process
 * whose module resolutions are recorded by a loader hook.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startConnectionCounter } from './helpers/cli.js';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Records every module the hook resolves; answers 'done' once all earlier ones are sent. */
const HOOKS = `
let port;
export function initialize(data) {
  port = data.port;
  port.on('message', () => port.postMessage({ done: true }));
}
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  port.postMessage({ url: result.url });
  return result;
}`;

/** Runs `body` (ESM source) in a fresh Node process; resolves with every module URL it loaded. */
async function modulesLoadedBy(body: string, env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  return (await probe(body, env)).modules;
}

/** As `modulesLoadedBy`, with the process's stderr. */
async function probe(body: string, env: NodeJS.ProcessEnv = {}): Promise<{ modules: string[]; stderr: string }> {
  const script = `
import { register, createRequire } from 'node:module';
import { MessageChannel } from 'node:worker_threads';
const { port1, port2 } = new MessageChannel();
const loaded = [];
const finished = new Promise((resolve) => port1.on('message', (m) => (m.done ? resolve() : loaded.push(m.url))));
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOKS)}), { data: { port: port2 }, transferList: [port2] });
try {
  ${body}
} finally {
  port1.postMessage('flush');
  await finished;
  port1.close();
  const cjs = Object.keys(createRequire(import.meta.url).cache).map((path) => 'file://' + path);
  process.stderr.write('\\nLOADED ' + JSON.stringify([...loaded, ...cjs]) + '\\n');
}`;
  const { stderr } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    env: { PATH: process.env.PATH, ...env },
  }).catch((error: { stderr: string }) => error);
  const line = stderr.split('\n').find((l) => l.startsWith('LOADED '));
  if (line === undefined) throw new Error(`no module list; stderr:\n${stderr}`);
  return { modules: (JSON.parse(line.slice('LOADED '.length)) as string[]).filter((url) => url.startsWith('file:')), stderr };
}

/**
 * Records each use of WebAssembly's compiling entry points (a codec compiled at import time
 * shows here whatever module it is in), Node's HTTP parser marked as such; `WASM_REPORT`
 * prints them as a `WASM [...]` line.
 */
const WASM_SPY = `
const wasmCalls = [];
for (const name of ['compile', 'compileStreaming', 'instantiate', 'instantiateStreaming']) {
  const original = WebAssembly[name];
  WebAssembly[name] = (...args) => (wasmCalls.push(name + (new Error().stack.includes('node:internal/deps/undici') ? ' (HTTP parser)' : '')), original(...args));
}
WebAssembly.Module = new Proxy(WebAssembly.Module, { construct: (target, args) => (wasmCalls.push('Module'), new target(...args)) });
WebAssembly.Instance = new Proxy(WebAssembly.Instance, { construct: (target, args) => (wasmCalls.push('Instance'), new target(...args)) });`;
const WASM_REPORT = `process.stderr.write('\\nWASM ' + JSON.stringify(wasmCalls) + '\\n');`;

function wasmCalls(stderr: string): string[] {
  const line = stderr.split('\n').find((l) => l.startsWith('WASM '));
  if (line === undefined) throw new Error(`no WebAssembly report; stderr:\n${stderr}`);
  return JSON.parse(line.slice('WASM '.length)) as string[];
}

function inRepo(urls: string[]): string[] {
  const base = pathToFileURL(root).href;
  return urls.filter((url) => url.startsWith(base)).map((url) => url.slice(base.length));
}

/** Runs the built command with `args` under the hook. */
function commandLoads(args: string[], env?: NodeJS.ProcessEnv): Promise<string[]> {
  return modulesLoadedBy(
    `process.argv = [process.argv[0], 'rt-translate', ...${JSON.stringify(args)}];
  // The entry module's top-level await returns once the command has ended.
  await import(${JSON.stringify(pathToFileURL(`${root}dist/bin/rt-translate.js`).href)});`,
    env,
  );
}

const CODECS = /node_modules\/(wav|opusscript|@wasm-audio-decoders|wasm-media-encoders)\//;
/** undici: loaded with the first HTTP request, not with the library. */
const UNDICI = /node_modules\/undici\//;

describe.concurrent('start-up', () => {
  it('--version loads the command line only: no command, library, codec or network module', async () => {
    const modules = await commandLoads(['--version']);
    const loaded = inRepo(modules);
    expect(loaded.filter((path) => path.startsWith('dist/'))).toEqual(
      expect.arrayContaining(['dist/bin/rt-translate.js', 'dist/bin/main.js', 'dist/bin/cli.js']),
    );
    expect(loaded.filter((path) => /^dist\/bin\/commands\/|^dist\/lib\//.test(path))).toEqual([]);
    expect(modules.filter((url) => url.includes('/node_modules/'))).toEqual([]);
  });

  it('the realtime command with raw input loads the library through its root, but no decoder, codec, HTTP library or emulator', async () => {
    const counter = await startConnectionCounter();
    try {
      // A refused connection ends it right after opening the input and the translator.
      const modules = await commandLoads(['--from', 'en-us', '--to', 'es-es', '-f', 's16le', '-i', '/dev/null', '--realtime-url', counter.url], {
        RT_TRANSLATE_API_KEY: 'k',
      });
      const loaded = inRepo(modules);
      expect(loaded).toContain('dist/bin/commands/translate.js');
      expect(loaded).toContain('dist/lib/index.js');
      expect(loaded).toContain('dist/lib/audio/source.js');
      // Packages are matched by their whole URL: node_modules may be a link out of the checkout.
      const unwanted = [
        ...modules.filter((url) => CODECS.test(url) || UNDICI.test(url)),
        ...loaded.filter((path) => /^dist\/lib\/emulator\//.test(path) || /^dist\/bin\/commands\/(?!translate\.js)/.test(path)),
      ];
      expect(unwanted).toEqual([]);
    } finally {
      await counter.close();
    }
  });

  it('importing the library loads no codec (the FLAC decoder included), no HTTP library, compiles no WebAssembly and loads no emulator', async () => {
    const index = JSON.stringify(pathToFileURL(`${root}dist/lib/index.js`).href);
    const { modules, stderr } = await probe(`${WASM_SPY}\n  await import(${index});\n  ${WASM_REPORT}`);
    const loaded = inRepo(modules);
    expect(loaded).toContain('dist/lib/index.js');
    expect(modules.filter((url) => CODECS.test(url) || UNDICI.test(url))).toEqual([]);
    expect(wasmCalls(stderr)).toEqual([]);
    expect(loaded.filter((path) => /^dist\/(lib\/emulator|bin)\//.test(path))).toEqual([]);
  });
});
