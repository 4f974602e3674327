/**
 * The page `rt-translate serve` serves: pick the languages, Start and Stop, the transcript and
 * the translation as they arrive, the translated audio played, and each response's latency.
 * It holds the token from its own address (`?token=`), never an API key: the relay it talks to
 * at `/v1/realtime` holds the key. `?from=` and `?to=` preselect the languages.
 *
 * What it shows is also in `window.rtTranslatePage` (state, responses, errors, the playback
 * position), for scripts that drive the page.
 *
 * With `?role=speaker` or `?role=listener` (and a room token) it is a room's page instead: see
 * `room-page.ts`.
 */
import { REALTIME_LANGUAGES, RealtimeTranslator, type ResponseTiming, type TranslatorStats } from '../../lib/browser/index.js';
import { startRoomPage, type RoomPageState } from './room-page.js';

interface ResponseRow {
  transcript: string;
  translation: string;
  timing: ResponseTiming | undefined;
  element: HTMLElement;
}

interface PageState {
  state: string;
  responses: Array<{ transcript: string; translation: string; timing: ResponseTiming | undefined }>;
  errors: string[];
  warnings: string[];
  stats: () => TranslatorStats | undefined;
  /** A room's page: its own state. */
  room: RoomPageState | undefined;
}

function byId<T extends HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`The page has no #${id}.`);
  return element as T;
}

const params = new URLSearchParams(location.search);
const token = params.get('token') ?? '';
const fromSelect = byId<HTMLSelectElement>('from');
const toSelect = byId<HTMLSelectElement>('to');
const startButton = byId<HTMLButtonElement>('start');
const stopButton = byId<HTMLButtonElement>('stop');
const muteBox = byId<HTMLInputElement>('mute');
const statusLine = byId<HTMLElement>('status');
const playedLine = byId<HTMLElement>('played');
const list = byId<HTMLElement>('responses');

for (const select of [fromSelect, toSelect]) {
  for (const tag of REALTIME_LANGUAGES) select.add(new Option(tag, tag));
}
fromSelect.value = params.get('from') ?? 'en-us';
toSelect.value = params.get('to') ?? 'es-es';

let translator: RealtimeTranslator | undefined;
let current: ResponseRow | undefined;
const rows: ResponseRow[] = [];

const page: PageState = {
  state: 'idle',
  responses: [],
  errors: [],
  warnings: [],
  stats: () => translator?.stats,
  room: undefined,
};
(globalThis as unknown as { rtTranslatePage: PageState }).rtTranslatePage = page;

function setStatus(text: string): void {
  statusLine.textContent = text;
}

/** The row of the response in progress, made by its first event. */
function row(): ResponseRow {
  if (current) return current;
  const element = document.createElement('li');
  element.innerHTML = '<div class="transcript"></div><div class="translation"></div><div class="latency"></div>';
  list.prepend(element);
  current = { transcript: '', translation: '', timing: undefined, element };
  rows.push(current);
  page.responses.push({ transcript: '', translation: '', timing: undefined });
  return current;
}

function render(r: ResponseRow): void {
  const index = rows.indexOf(r);
  page.responses[index] = { transcript: r.transcript, translation: r.translation, timing: r.timing };
  r.element.querySelector('.transcript')!.textContent = r.transcript;
  r.element.querySelector('.translation')!.textContent = r.translation;
  const t = r.timing;
  r.element.querySelector('.latency')!.textContent = t
    ? t.firstAudioMs !== undefined || t.doneMs !== undefined
      ? `first audio ${t.firstAudioMs ?? '-'} ms, done ${t.doneMs ?? '-'} ms after the speech ended`
      : 'latency unknown (a piece of longer speech)'
    : '';
}

/** Changes the current response's row and shows it. */
function edit(change: (r: ResponseRow) => void): void {
  const r = row();
  change(r);
  render(r);
}

function showPosition(): void {
  const stats = translator?.stats;
  if (!stats) return;
  playedLine.textContent = `translated audio played: ${(stats.playback.playedMs / 1000).toFixed(2)} s of ${(stats.receivedAudioMs / 1000).toFixed(2)} s received`;
}

function start(): void {
  startButton.disabled = true;
  stopButton.disabled = false;
  const t = new RealtimeTranslator({
    url: '/v1/realtime',
    token,
    from: fromSelect.value,
    to: toSelect.value,
    whilePlaying: muteBox.checked ? 'mute' : 'continue',
  });
  translator = t;
  t.on('state', (state) => {
    page.state = state;
    setStatus(state === 'running' ? 'Listening: speak now.' : state === 'starting' ? 'Starting...' : state);
  });
  t.on('transcript.delta', (delta) => edit((r) => (r.transcript += delta)));
  t.on('transcript.done', (text) => edit((r) => (r.transcript = text)));
  t.on('text.delta', (delta) => edit((r) => (r.translation += delta)));
  t.on('text.done', (text) => edit((r) => (r.translation = text)));
  t.on('response', (timing) => {
    edit((r) => (r.timing = timing));
    current = undefined;
  });
  t.on('server.error', (message) => page.warnings.push(message));
  t.on('warning', (warning) => page.warnings.push(warning.message));
  t.on('error', (error) => {
    page.errors.push(error.message);
    setStatus(`Stopped: ${error.message}`);
  });
  t.on('closed', () => {
    startButton.disabled = false;
    stopButton.disabled = true;
    showPosition();
  });
  t.start().catch(() => {
    // Reported by the `error` listener.
  });
}

const role = params.get('role');
if (role === 'speaker' || role === 'listener') page.room = startRoomPage(role, token, params, setStatus);
startButton.addEventListener('click', start);
stopButton.addEventListener('click', () => void translator?.stop());
setInterval(showPosition, 250);
if (token === '') setStatus('This page needs the address rt-translate serve printed (with ?token=).');
