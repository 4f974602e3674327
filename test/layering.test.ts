/**
 * The library's layers, checked from its own imports: base (errors, configuration, option
 * checks) < audio < realtime < http < batch (jobs files, running them) < integrations (Discord,
 * Twilio, the relay, the browser module) < emulator < the entry points (`index.ts`, `dsp.ts`,
 * `protocol.ts`). No file imports a higher layer, and no files import each other in a circle,
 * type-only imports included: a newcomer can read any file knowing only the layers below it.
 * Imports are read with the TypeScript compiler's own pre-processor (static, re-exports and
 * `import()` with a literal).
 *
 * The command line (`bin/`) is a user of the package like any other: it imports the library
 * only through the package's public entry points (the files behind `exports` in package.json),
 * so whatever it does, a program built on the package can do too.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LIB = join(ROOT, 'lib');
const BIN = join(ROOT, 'bin');

const LAYERS = ['base', 'audio', 'realtime', 'http', 'batch', 'integrations', 'emulator', 'entry'] as const;
type Layer = (typeof LAYERS)[number];

/** The layer of a library file (path relative to lib/, with `/`). */
function layerOf(file: string): Layer {
  const [top] = file.split('/');
  if (file === 'index.ts' || file === 'dsp.ts' || file === 'protocol.ts') return 'entry';
  if (!file.includes('/')) return 'base';
  switch (top) {
    case 'audio':
      return 'audio';
    case 'realtime':
      return 'realtime';
    case 'http':
      return 'http';
    case 'batch':
      return 'batch';
    case 'integrations':
    case 'relay':
    case 'browser':
      return 'integrations';
    case 'emulator':
      return 'emulator';
    default:
      throw new Error(`lib/${file} is in no layer: add its folder to layerOf`);
  }
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The library files `file` imports (relative specifiers only; `.js` names the `.ts` source). */
function importsOf(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  return importedFiles
    .map((imported) => imported.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => resolve(dirname(file), name).replace(/\.js$/, '.ts'));
}

type Graph = ReadonlyMap<string, readonly string[]>;

const libPath = (file: string): string => relative(LIB, file).split('\\').join('/');
const graph: Graph = new Map(sourceFiles(LIB).map((file) => [libPath(file), importsOf(file).map(libPath)]));

/** Every import of `g` from a file to a file of a higher layer, as `from (layer) -> to (layer)`. */
function upwardImports(g: Graph): string[] {
  return [...g].flatMap(([file, imports]) =>
    imports
      .filter((target) => g.has(target) && LAYERS.indexOf(layerOf(target)) > LAYERS.indexOf(layerOf(file)))
      .map((target) => `${file} (${layerOf(file)}) -> ${target} (${layerOf(target)})`),
  );
}

/** Circles of `g` (Tarjan's strongly connected components of more than one file, or a file importing itself). */
function circles(g: Graph): string[][] {
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string): void => {
    order.set(file, index);
    low.set(file, index++);
    stack.push(file);
    onStack.add(file);
    for (const next of g.get(file) ?? []) {
      if (!g.has(next)) continue;
      if (!order.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file)!, order.get(next)!));
      }
    }
    if (low.get(file) !== order.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || g.get(file)!.includes(file)) found.push(component.sort());
  };
  for (const file of g.keys()) if (!order.has(file)) visit(file);
  return found;
}

/** The source files behind the package's `exports` (`./dist/lib/http/index.js` is `lib/http/index.ts`), relative to lib/. */
function entryPoints(): string[] {
  const { exports } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, string | { import?: string }> };
  return Object.values(exports)
    .map((target) => (typeof target === 'string' ? target : target.import))
    .flatMap((target) => (target !== undefined && /^\.\/dist\/lib\/.*\.js$/.test(target) ? [target.slice('./dist/lib/'.length).replace(/\.js$/, '.ts')] : []));
}

/** Every import of a library file from `files` (path relative to the root -> its imports, relative to lib/) that is not an entry point, as `file -> lib/target`. */
function internalImports(files: ReadonlyMap<string, readonly string[]>, entries: readonly string[]): string[] {
  return [...files].flatMap(([file, imports]) =>
    imports.filter((target) => !target.startsWith('..') && !entries.includes(target)).map((target) => `${file} -> lib/${target}`),
  );
}

const binImports = new Map(sourceFiles(BIN).map((file) => [relative(ROOT, file).split('\\').join('/'), importsOf(file).map(libPath)]));

describe('the library is layered', () => {
  it('reads every library file and each import resolves to one', () => {
    expect(graph.size).toBeGreaterThan(100);
    const missing = [...graph].flatMap(([file, imports]) =>
      imports.filter((target) => !graph.has(target) && !target.endsWith('.json')).map((target) => `${file} -> ${target}`),
    );
    expect(missing).toEqual([]);
  });

  it('no file imports a layer above its own', () => {
    expect(upwardImports(graph)).toEqual([]);
  });

  it('no files import each other in a circle, type-only imports included', () => {
    expect(circles(graph)).toEqual([]);
  });

  it('the checks find what they look for: a planted upward import, a planted circle', () => {
    const planted = new Map(graph);
    planted.set('audio/pcm-chunker.ts', [...graph.get('audio/pcm-chunker.ts')!, 'http/client.ts']);
    planted.set('errors.ts', [...graph.get('errors.ts')!, 'config.ts']);
    planted.set('config.ts', [...graph.get('config.ts')!, 'errors.ts']);
    expect(upwardImports(planted)).toEqual(['audio/pcm-chunker.ts (audio) -> http/client.ts (http)']);
    expect(circles(planted)).toEqual([['config.ts', 'errors.ts']]);
  });
});

describe('the command line uses the package as its users do', () => {
  it('reads every file of bin/ and the entry points of package.json', () => {
    expect(binImports.size).toBeGreaterThan(30);
    expect(binImports.has('bin/page/app.ts')).toBe(true);
    const entries = entryPoints();
    expect(entries).toEqual(
      expect.arrayContaining(['index.ts', 'http/index.ts', 'dsp.ts', 'protocol.ts', 'emulator/index.ts', 'browser/index.ts', 'browser/worklet.ts']),
    );
    expect(entries.filter((entry) => !graph.has(entry))).toEqual([]);
  });

  it('no file of bin/ imports a library file that is not an entry point', () => {
    expect(internalImports(binImports, entryPoints())).toEqual([]);
  });

  it('the check finds what it looks for: a planted import of an internal module, dynamic or static', () => {
    const planted = new Map([['bin/commands/tts.ts', ['../bin/cli.ts', 'index.ts', 'http/index.ts', 'http/schemas.ts']]]);
    expect(internalImports(planted, entryPoints())).toEqual(['bin/commands/tts.ts -> lib/http/schemas.ts']);
    const { importedFiles } = ts.preProcessFile("const { wavDataLayout } = await import('../lib/audio/wav.js');", true, true);
    expect(importedFiles.map((imported) => imported.fileName)).toEqual(['../lib/audio/wav.js']);
  });
});
