/**
 * What a room's two roles (`room.ts`, `room-speaker.ts`) check and do alike: the relay's rooms
 * endpoint as a URL with the token in the subprotocols, the room's name, an AudioContext
 * resumed inside the user's gesture, and the error a connection's close stands for.
 */
import { ConnectionError, TimeoutError, ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';
import { RELAY_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX } from '../relay/subprotocols.js';

/** The parts both roles check alike: the rooms endpoint, the token, the room. */
export interface RoomEndpoint {
  url: URL;
  protocols: string[];
}

/** The rooms' endpoint (`ws://`, `wss://` or a path resolved against the page) with the token as a subprotocol. */
export function resolveEndpoint(options: { url?: unknown; token?: unknown; room?: unknown }): RoomEndpoint {
  if ('apiKey' in options) throw new ValidationError('apiKey', 'no API key in a web page: connect to a relay room with a token it minted', 'an API key');
  const accepted = "the relay's rooms endpoint, a ws:// or wss:// URL or a path such as '/v1/rooms'";
  if (typeof options.url !== 'string' || options.url === '') throw new ValidationError('url', accepted, describeReceived(options.url));
  let url: URL;
  try {
    url = new URL(options.url, globalThis.location?.href);
  } catch {
    throw new ValidationError('url', accepted, describeReceived(options.url));
  }
  if (url.protocol === 'http:' || url.protocol === 'https:') url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw new ValidationError('url', accepted, describeReceived(options.url));
  const token = options.token;
  if (token !== undefined && (typeof token !== 'string' || !/^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/.test(token))) {
    throw new ValidationError('token', 'a room token minted by the relay (a non-empty string of URL-safe characters)', describeReceived(token));
  }
  if (options.room !== undefined) {
    if (typeof options.room !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(options.room)) {
      throw new ValidationError('room', 'a room id of 1 to 64 letters, digits, - or _', describeReceived(options.room));
    }
    url.searchParams.set('room', options.room);
  }
  return { url, protocols: token === undefined ? [] : [RELAY_SUBPROTOCOL, `${TOKEN_SUBPROTOCOL_PREFIX}${token}`] };
}

/** A context created (or resumed) now, in the gesture; bounded by `ms` (outside a gesture it may wait forever). */
export async function resumedContext(context: AudioContext, ms: number): Promise<void> {
  if (context.state === 'running') return;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      context.resume(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new TimeoutError(`The AudioContext did not start within ${ms} ms: call start() from a click or key handler.`, ms)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export const closedError = (close: CloseEvent, what: string): ConnectionError =>
  new ConnectionError(`${what} (code ${close.code}${close.reason ? `: ${close.reason}` : ''}).`, { closeCode: close.code });

/* ============================================================================= the listener */
