/**
 * The emulator's HTTP side. Until the HTTP interface lands, every request is answered 404 with
 * a JSON body saying so.
 */
import type { EmulatorContext, HttpPart } from '../server.js';

// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface HttpEmulatorOptions {}

export function createHttpEmulator(_options: HttpEmulatorOptions, _context: EmulatorContext): HttpPart {
  return {
    handle(req, res) {
      const body = JSON.stringify({ error: `No route for ${req.method} ${req.url}`, status: 404 });
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    },
    async close() {},
  };
}
