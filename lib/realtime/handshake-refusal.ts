/**
 * A WebSocket upgrade answered with an HTTP refusal instead of switching protocols, in the
 * service's error shape: a JSON body `{ "error": message, "status": status }` (the interface's
 * 401/403/429 body), an optional `Retry-After`, and the connection closed once it is written.
 * What a client of the service reads from a refused handshake (`RealtimeConnection` reads the
 * status, `Retry-After` and the body's `error`), so every server side of the library (the
 * emulator, the relay) refuses the same way.
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

export function refuseUpgrade(socket: Duplex, status: number, error: string, retryAfterS?: number): void {
  const body = JSON.stringify({ error, status });
  const reason = STATUS_CODES[status] ?? 'Refused';
  const retry = retryAfterS === undefined ? '' : `Retry-After: ${retryAfterS}\r\n`;
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\n${retry}` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
