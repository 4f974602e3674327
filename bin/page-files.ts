/**
 * What `rt-translate serve` answers besides the relay: the page at `/` and, under `/js/`, the
 * built ES modules it runs (the page's script, the browser module, its worklet and the library
 * modules they import), found by following their relative imports from the two entry points,
 * so nothing else of the installed package is served. A bare or `node:` import among them would
 * not load in a browser: it is refused when the files are collected.
 */
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';

/** The built package's root (`dist/`), two levels above this module's build. */
const DIST = new URL('../', import.meta.url);
/** The modules the page loads: its script, and the worklet it adds to its AudioContext. */
const ENTRIES = ['bin/page/app.js', 'lib/browser/worklet.js'];
const MODULE_PREFIX = '/js/';

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rt-translate: live translation</title>
<style>
  body { font: 16px/1.4 system-ui, sans-serif; margin: 2rem auto; max-width: 46rem; padding: 0 1rem; }
  fieldset { border: 1px solid #ccc; border-radius: 6px; display: flex; flex-wrap: wrap; gap: 0.75rem; align-items: center; }
  button { font-size: 1rem; padding: 0.4rem 1.2rem; }
  #status { font-weight: 600; margin: 1rem 0 0.25rem; }
  #played { color: #555; font-size: 0.9rem; }
  ol { list-style: none; padding: 0; }
  li { border-bottom: 1px solid #eee; padding: 0.6rem 0; }
  .transcript { color: #555; }
  .translation { font-size: 1.15rem; }
  .latency { color: #888; font-size: 0.8rem; }
  .columns { display: flex; gap: 1rem; flex-wrap: wrap; }
  .columns section { flex: 1 1 14rem; }
  .columns h2 { font-size: 1rem; margin: 0.5rem 0; }
</style>
</head>
<body>
<h1>Live translation</h1>
<fieldset id="solo">
  <label>From <select id="from"></select></label>
  <label>To <select id="to"></select></label>
  <label><input type="checkbox" id="mute"> Mute the microphone while the translation plays (speakers, no headphones)</label>
  <button id="start">Start</button>
  <button id="stop" disabled>Stop</button>
</fieldset>
<fieldset id="speaker" hidden>
  <label>I speak <select id="speak-from"></select></label>
  <button id="speak-start">Start speaking</button>
  <button id="speak-stop" disabled>Stop</button>
</fieldset>
<fieldset id="listener" hidden>
  <span>Languages</span> <span id="listen-languages"></span>
  <label>Play <select id="listen-play"></select></label>
  <button id="listen-start">Listen</button>
  <button id="listen-stop" disabled>Stop</button>
</fieldset>
<p id="status">Press Start and allow the microphone.</p>
<p id="played"></p>
<ul id="room-languages"></ul>
<div id="room-columns" class="columns"></div>
<ol id="responses"></ol>
<script type="module" src="${MODULE_PREFIX}bin/page/app.js"></script>
</body>
</html>
`;

/** Relative import specifiers of an ES module's text (static and dynamic). */
function relativeImports(text: string): { relative: string[]; other: string[] } {
  const relative: string[] = [];
  const other: string[] = [];
  // Import and export declarations start a line in the compiler's output; dynamic imports anywhere.
  const pattern = /^\s*(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;
  for (const match of text.matchAll(pattern)) {
    const spec = (match[1] ?? match[2] ?? match[3])!;
    (spec.startsWith('./') || spec.startsWith('../') ? relative : other).push(spec);
  }
  return { relative, other };
}

/**
 * The page's modules: URL path (`/js/` + the path under `dist/`) to file contents, read once.
 * Throws when an entry is missing (the package is not built) or a module imports something a
 * browser cannot load.
 */
export async function collectPageModules(): Promise<Map<string, string>> {
  const modules = new Map<string, string>();
  const queue = ENTRIES.map((entry) => new URL(entry, DIST));
  while (queue.length > 0) {
    const url = queue.pop()!;
    const path = MODULE_PREFIX + url.pathname.slice(DIST.pathname.length);
    if (modules.has(path)) continue;
    const text = await readFile(fileURLToPath(url), 'utf8');
    const { relative, other } = relativeImports(text);
    if (other.length > 0) throw new Error(`${path} imports ${other.join(', ')}, which a browser cannot load.`);
    modules.set(path, text);
    for (const spec of relative) queue.push(new URL(spec, url));
  }
  return modules;
}

/**
 * Answers `GET /` with the page and `GET /js/...` with the page's modules; false for any other
 * request (the caller answers it). The page's security policy lets it load only its own modules
 * and connect only to its own origin.
 */
export function servePageRequest(modules: ReadonlyMap<string, string>, req: IncomingMessage, res: ServerResponse): boolean {
  const path = new URL(req.url ?? '/', 'http://page').pathname;
  if (path === '/favicon.ico') {
    res.writeHead(204).end(); // no icon, and no failed request in the page's console
    return true;
  }
  const body = path === '/' ? PAGE : modules.get(path);
  if (body === undefined || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
  res.writeHead(200, {
    'content-type': path === '/' ? 'text/html; charset=utf-8' : 'text/javascript; charset=utf-8',
    'content-security-policy': "default-src 'self'; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
  return true;
}
