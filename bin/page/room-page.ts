/**
 * The room pages `rt-translate serve` prints (`?role=speaker` and `?role=listener`): the speaker
 * picks the language spoken and talks; each listener ticks the languages to receive and picks
 * the one played, and sees every ticked language's translation in its own column. However many
 * listen, the relay runs one session per language ticked by anyone.
 *
 * What it shows is in `window.rtTranslatePage.room` for scripts that drive the page.
 */
import { REALTIME_LANGUAGES, RealtimeRoomListener, RealtimeRoomSpeaker, type RoomLanguageInfo } from '../../lib/browser/index.js';

export interface RoomPageState {
  role: 'speaker' | 'listener';
  state: string;
  errors: string[];
  /** Speaker: who listens to what. */
  languages: RoomLanguageInfo[];
  /** Listener: each language's finished translations, in order. */
  texts: Record<string, string[]>;
  /** Listener: translated audio received per language, in ms. */
  receivedAudioMs: () => Record<string, number | undefined>;
  /** Listener: the language played. */
  playing: () => string | undefined;
}

function byId<T extends HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`The page has no #${id}.`);
  return element as T;
}

const URL_PATH = '/v1/rooms';

export function startRoomPage(role: 'speaker' | 'listener', token: string, params: URLSearchParams, setStatus: (text: string) => void): RoomPageState {
  byId('solo').hidden = true;
  const state: RoomPageState = { role, state: 'idle', errors: [], languages: [], texts: {}, receivedAudioMs: () => ({}), playing: () => undefined };
  if (role === 'speaker') speakerPage(token, params, state, setStatus);
  else listenerPage(token, params, state, setStatus);
  return state;
}

function speakerPage(token: string, params: URLSearchParams, state: RoomPageState, setStatus: (text: string) => void): void {
  byId('speaker').hidden = false;
  const from = byId<HTMLSelectElement>('speak-from');
  for (const tag of REALTIME_LANGUAGES) from.add(new Option(tag, tag));
  from.value = params.get('from') ?? 'en-us';
  const start = byId<HTMLButtonElement>('speak-start');
  const stop = byId<HTMLButtonElement>('speak-stop');
  const list = byId<HTMLUListElement>('room-languages');
  setStatus('Press Start speaking and allow the microphone; share the listener link with your audience.');
  let speaker: RealtimeRoomSpeaker | undefined;
  start.addEventListener('click', () => {
    start.disabled = true;
    stop.disabled = false;
    const s = new RealtimeRoomSpeaker({ url: URL_PATH, token, from: from.value });
    speaker = s;
    s.on('state', (next) => {
      state.state = next;
      setStatus(next === 'running' ? 'Speaking: your listeners hear the translation.' : next === 'starting' ? 'Starting...' : next);
    });
    s.on('languages', (languages, listeners) => {
      state.languages = languages;
      list.replaceChildren(
        ...languages.map((l) => Object.assign(document.createElement('li'), { textContent: `${l.lang}: ${l.listeners} listening (${l.status})` })),
        Object.assign(document.createElement('li'), { textContent: `${listeners} listener connections in all` }),
      );
    });
    s.on('error', (error) => {
      state.errors.push(error.message);
      setStatus(`Stopped: ${error.message}`);
    });
    s.on('closed', () => {
      start.disabled = false;
      stop.disabled = true;
    });
    s.start().catch(() => undefined); // reported by the `error` listener
  });
  stop.addEventListener('click', () => void speaker?.stop());
}

function listenerPage(token: string, params: URLSearchParams, state: RoomPageState, setStatus: (text: string) => void): void {
  byId('listener').hidden = false;
  const boxes = byId('listen-languages');
  const play = byId<HTMLSelectElement>('listen-play');
  const start = byId<HTMLButtonElement>('listen-start');
  const stop = byId<HTMLButtonElement>('listen-stop');
  const columns = byId('room-columns');
  // `?languages=es-es,fr-fr` preselects.
  const preselected = new Set((params.get('languages') ?? 'es-es').split(',').map((t) => t.trim().toLowerCase()));
  for (const tag of REALTIME_LANGUAGES) {
    const label = document.createElement('label');
    const box = Object.assign(document.createElement('input'), { type: 'checkbox', value: tag, checked: preselected.has(tag) });
    box.dataset.lang = tag;
    label.append(box, ` ${tag} `);
    boxes.append(label);
  }
  const ticked = (): string[] => [...boxes.querySelectorAll<HTMLInputElement>('input:checked')].map((b) => b.value);
  const refreshPlay = (): void => {
    const current = play.value;
    play.replaceChildren(new Option('none', ''), ...ticked().map((tag) => new Option(tag, tag)));
    play.value = ticked().includes(current) ? current : (ticked()[0] ?? '');
  };
  boxes.addEventListener('change', refreshPlay);
  refreshPlay();
  setStatus('Tick the languages to receive, pick the one to hear, and press Listen.');

  let listener: RealtimeRoomListener | undefined;
  play.addEventListener('change', () => listener?.play(play.value === '' ? false : play.value));
  start.addEventListener('click', () => {
    const languages = ticked();
    if (languages.length === 0) {
      setStatus('Tick at least one language.');
      return;
    }
    start.disabled = true;
    stop.disabled = false;
    for (const box of boxes.querySelectorAll<HTMLInputElement>('input')) box.disabled = true;
    const l = new RealtimeRoomListener({ url: URL_PATH, token, languages, play: play.value === '' ? false : play.value });
    listener = l;
    state.receivedAudioMs = () => l.stats.receivedAudioMs;
    state.playing = () => l.playing;
    const lists = new Map<string, HTMLOListElement>();
    columns.replaceChildren(
      ...languages.map((lang) => {
        const section = document.createElement('section');
        const list = document.createElement('ol');
        section.append(Object.assign(document.createElement('h2'), { textContent: lang }), list);
        lists.set(lang, list);
        state.texts[lang] = [];
        return section;
      }),
    );
    l.on('state', (next) => {
      state.state = next;
      if (next === 'stopped') {
        start.disabled = false;
        stop.disabled = true;
        for (const box of boxes.querySelectorAll<HTMLInputElement>('input')) box.disabled = false;
      } else {
        setStatus(next === 'running' ? 'Listening.' : 'Connecting...');
      }
    });
    l.on('waiting', (lang) => setStatus(`Waiting for the speaker (${lang}).`));
    l.on('text.done', (lang, text) => {
      state.texts[lang]!.push(text);
      lists.get(lang)?.prepend(Object.assign(document.createElement('li'), { className: 'translation', textContent: text }));
    });
    l.on('error', (lang, error) => state.errors.push(`${lang}: ${error.message}`));
    l.on('closed', (lang, info) => {
      if (!info.byUser) setStatus(`${lang}: ${info.reason || `closed (${info.code})`}`);
    });
    l.start().catch((error: Error) => {
      state.errors.push(error.message);
      setStatus(`Stopped: ${error.message}`);
    });
  });
  stop.addEventListener('click', () => void listener?.stop());
}
