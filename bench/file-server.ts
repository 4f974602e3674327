/**
 * A child process of `flac-download.bench.ts`: serves one synthesized FLAC file over HTTP on
 * loopback (the emulator's file store: ranges, presigned URLs), so that the bench's CPU time is
 * the client's alone. Sends `{ url, bytes }` once listening; exits with its parent.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createFileStore } from '../lib/emulator/http/files.js';
import { synthesizeFlac } from '../lib/emulator/synth.js';

const seconds = Number(process.env.FLAC_SECONDS ?? 20);
const rate = Number(process.env.FLAC_RATE ?? 48000);
const flac = synthesizeFlac('bench', { sampleRate: rate, durationMs: seconds * 1000 });
let baseUrl = '';
const store = createFileStore({ urlTtlMs: 3_600_000 }, () => baseUrl);
const server = createServer((req, res) => {
  if (!store.handle(req, res)) {
    res.writeHead(404);
    res.end();
  }
});
server.listen(0, '127.0.0.1', () => {
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { url } = store.put(flac, 'audio/flac', 'bench.flac');
  process.send?.({ url, bytes: flac.length });
});
process.on('disconnect', () => process.exit(0));
