/**
 * The package's public surface, one report per entry point of `package.json` `exports`
 * (`api/<entry>.api.md`): every exported name with its kind and declared shape (a function's
 * signatures, a class's public members, an interface's fields, a type's definition), read with
 * the TypeScript compiler from the sources. `test/api-report.test.ts` compares the reports with
 * the committed ones, so a change to the surface is a reviewed change to `api/`.
 *
 *   npm run api:report          write the reports
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

/** The repository's root (this file is `scripts/` or `dist/scripts/`). */
function repositoryRoot(): string {
  const here = fileURLToPath(new URL('.', import.meta.url));
  return here.includes(`${join('dist', 'scripts')}`) ? join(here, '..', '..') : join(here, '..');
}

/** An entry point: its name in `exports`, its source, and the configuration it is compiled with. */
interface Entry {
  name: string;
  source: string;
  tsconfig: string;
}

function entries(root: string): Entry[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, string | { import?: string }> };
  return Object.entries(pkg.exports).flatMap(([name, target]) => {
    const built = typeof target === 'string' ? target : target.import;
    if (built === undefined || !built.startsWith('./dist/') || !built.endsWith('.js')) return [];
    const source = built.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts');
    return [{ name, source, tsconfig: source.startsWith('lib/browser/') ? 'tsconfig.browser.json' : 'tsconfig.json' }];
  });
}

/** The report file of entry `name`: `.` is `root`, `./browser/worklet` is `browser-worklet`. */
export function reportFileOf(name: string): string {
  return `${name === '.' ? 'root' : name.replace(/^\.\//, '').replace(/\//g, '-')}.api.md`;
}

function program(root: string, tsconfig: string, files: string[]): ts.Program {
  const config = ts.readConfigFile(join(root, tsconfig), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  return ts.createProgram(
    files.map((f) => join(root, f)),
    { ...parsed.options, noEmit: true },
  );
}

const FORMAT = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType | ts.TypeFormatFlags.WriteArrowStyleSignature;

function isPublicMember(symbol: ts.Symbol): boolean {
  if (symbol.getName().startsWith('#') || symbol.getName().startsWith('__')) return false;
  const declaration = symbol.valueDeclaration ?? symbol.declarations?.[0];
  if (!declaration) return true;
  const modifiers = ts.getCombinedModifierFlags(declaration);
  return (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0;
}

/** One exported name, as lines of the report. */
function describeExport(checker: ts.TypeChecker, exported: ts.Symbol, runtime: ReadonlySet<string> | undefined): { lines: string[]; value: boolean } {
  const name = exported.getName();
  const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
  const flags = symbol.flags;
  const declaration = symbol.valueDeclaration ?? symbol.declarations?.[0];
  const lines: string[] = [];
  // A value the entry point really exports at run time (`export type` re-exports a class as a type only).
  const value = runtime ? runtime.has(name) : (flags & ts.SymbolFlags.Value) !== 0;
  if (!value && flags & ts.SymbolFlags.Value && !(flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias))) {
    return { lines: [`type ${name} (${flags & ts.SymbolFlags.Class ? 'a class' : 'a value'}'s type; no value of this entry point)`], value };
  }
  if (flags & ts.SymbolFlags.Class && declaration) {
    const instance = checker.getDeclaredTypeOfSymbol(symbol);
    const constructorType = checker.getTypeOfSymbolAtLocation(symbol, declaration);
    const heritage = checker.getBaseTypes(instance as ts.InterfaceType).map((t) => checker.typeToString(t, undefined, FORMAT));
    lines.push(`class ${name}${heritage.length > 0 ? ` extends ${heritage.join(', ')}` : ''}`);
    for (const signature of constructorType.getConstructSignatures()) {
      const params = signature
        .getParameters()
        .map((p) => `${p.getName()}: ${checker.typeToString(checker.getTypeOfSymbolAtLocation(p, declaration), undefined, FORMAT)}`);
      lines.push(`  constructor(${params.join(', ')})`);
    }
    // Static members the class declares itself (not those of Duplex, Error, ...).
    for (const member of symbol.exports ? [...(symbol.exports.values() as Iterable<ts.Symbol>)] : []) {
      if (member.getName() === 'prototype' || !isPublicMember(member)) continue;
      lines.push(`  static ${member.getName()}: ${checker.typeToString(checker.getTypeOfSymbolAtLocation(member, declaration), undefined, FORMAT)}`);
    }
    const own = new Set((symbol.members ? [...(symbol.members.values() as Iterable<ts.Symbol>)] : []).map((m) => m.getName()));
    for (const member of checker.getPropertiesOfType(instance)) {
      if (!own.has(member.getName()) || !isPublicMember(member)) continue;
      lines.push(`  ${member.getName()}: ${checker.typeToString(checker.getTypeOfSymbolAtLocation(member, declaration), undefined, FORMAT)}`);
    }
  } else if (flags & ts.SymbolFlags.Function && declaration) {
    const type = checker.getTypeOfSymbolAtLocation(symbol, declaration);
    for (const signature of type.getCallSignatures()) lines.push(`function ${name}${checker.signatureToString(signature, undefined, FORMAT)}`);
  } else if (flags & (ts.SymbolFlags.Variable | ts.SymbolFlags.Property) && declaration) {
    lines.push(`const ${name}: ${checker.typeToString(checker.getTypeOfSymbolAtLocation(symbol, declaration), undefined, FORMAT)}`);
  } else if (flags & ts.SymbolFlags.Enum) {
    lines.push(`enum ${name}`);
  }
  if (flags & ts.SymbolFlags.Interface && !(flags & ts.SymbolFlags.Class)) {
    const type = checker.getDeclaredTypeOfSymbol(symbol);
    const heritage = checker.getBaseTypes(type as ts.InterfaceType).map((t) => checker.typeToString(t, undefined, FORMAT));
    lines.push(`interface ${name}${heritage.length > 0 ? ` extends ${heritage.join(', ')}` : ''}`);
    const own = new Set((symbol.members ? [...(symbol.members.values() as Iterable<ts.Symbol>)] : []).map((m) => m.getName()));
    for (const member of checker.getPropertiesOfType(type)) {
      if (!own.has(member.getName())) continue;
      const at = member.valueDeclaration ?? member.declarations?.[0];
      const optional = member.flags & ts.SymbolFlags.Optional ? '?' : '';
      lines.push(`  ${member.getName()}${optional}: ${at ? checker.typeToString(checker.getTypeOfSymbolAtLocation(member, at), undefined, FORMAT) : '?'}`);
    }
    for (const signature of type.getCallSignatures()) lines.push(`  ${checker.signatureToString(signature, undefined, FORMAT)}`);
  }
  if (flags & ts.SymbolFlags.TypeAlias) {
    const alias = symbol.declarations?.find(ts.isTypeAliasDeclaration);
    lines.push(
      `type ${name} = ${alias ? alias.type.getText().replace(/\s+/g, ' ') : checker.typeToString(checker.getDeclaredTypeOfSymbol(symbol), undefined, FORMAT)}`,
    );
  }
  if (lines.length === 0) lines.push(`${value ? 'value' : 'type'} ${name}`);
  return { lines, value };
}

/** The names an entry point exports at run time (its built module), or undefined where it cannot be loaded in Node. */
async function runtimeExports(root: string, entry: Entry): Promise<ReadonlySet<string> | undefined> {
  try {
    const module = (await import(pathToFileURL(join(root, 'dist', entry.source.replace(/\.ts$/, '.js'))).href)) as Record<string, unknown>;
    return new Set(Object.keys(module));
  } catch {
    return undefined;
  }
}

/** The report of every entry point, by report file name (the entry points are loaded from `dist/`: build first). */
export async function apiReports(root = repositoryRoot()): Promise<Map<string, string>> {
  const reports = new Map<string, string>();
  const all = entries(root);
  for (const tsconfig of new Set(all.map((e) => e.tsconfig))) {
    const group = all.filter((e) => e.tsconfig === tsconfig);
    const built = program(
      root,
      tsconfig,
      group.map((e) => e.source),
    );
    const checker = built.getTypeChecker();
    for (const entry of group) {
      const file = built.getSourceFile(join(root, entry.source));
      const moduleSymbol = file && checker.getSymbolAtLocation(file);
      if (!moduleSymbol) throw new Error(`${entry.source}: not a module the compiler could read`);
      const exported = checker.getExportsOfModule(moduleSymbol).sort((a, b) => a.getName().localeCompare(b.getName()));
      const runtime = await runtimeExports(root, entry);
      const described = exported.map((symbol) => describeExport(checker, symbol, runtime));
      const values = described.filter((d) => d.value).length;
      const text = [
        `# API of \`rt-translate${entry.name === '.' ? '' : entry.name.slice(1)}\``,
        '',
        `Generated by \`npm run api:report\` from \`${entry.source}\`: ${values} values, ${described.length - values} types only.`,
        '',
        '```ts',
        ...described.flatMap((d) => d.lines),
        '```',
        '',
      ].join('\n');
      reports.set(reportFileOf(entry.name), text);
    }
  }
  return reports;
}

async function main(): Promise<void> {
  const root = repositoryRoot();
  const dir = join(root, 'api');
  mkdirSync(dir, { recursive: true });
  for (const [file, text] of await apiReports(root)) {
    writeFileSync(join(dir, file), text);
    process.stdout.write(`api/${file}\n`);
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) await main();
