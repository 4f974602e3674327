/**
 * The append path: audio into `input_audio_buffer.append` events and onto the socket.
 *
 * 1. `encodeAudioAppend` (limit checks, base64, JSON framing), plus the text frame's bytes that
 *    `ws` makes from the string, for append pieces of 1 KiB to 256 KiB: against the same work
 *    done by hand (bare base64 + JSON) in pieces of the same size, and against that work in
 *    64 KiB pieces, the fast path: the second ratio shows where the event's string falls off
 *    V8's fast path (from about 96 KiB, 128 Ki characters: the large-object space) and that
 *    `APPEND_PIECE_BYTES` stays clear of it.
 * 2. End to end, in child processes with the emulator in another one: `RealtimeTranslateStream`
 *    sending 16 MiB in writes of 1 KiB to 4 MiB, split into appends of 256 KiB (the most the
 *    service takes) or of `APPEND_PIECE_BYTES` (the stream's default), against a bare `ws` client sending the same
 *    bytes in appends built by hand, as large as the stream's (the write, or
 *    `APPEND_PIECE_BYTES` when the write is larger). CPU time of the sending process.
 * 3. `bufferutil`, when it is installed: the same sends with `ws` using it and not
 *    (`WS_NO_BUFFER_UTIL`), to decide whether the native masking earns its place.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { APPEND_PIECE_BYTES, encodeAudioAppend } from '../lib/realtime/codec.js';
import { compare, record } from './harness.js';

const TOTAL = 16 * 1024 * 1024;
const KEY = 'concurrency-bench-key'; // the key the emulator process accepts

function child(module: string, env: NodeJS.ProcessEnv = {}): ChildProcess {
  return fork(fileURLToPath(new URL(module, import.meta.url)), [], { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

function next(proc: ChildProcess): Promise<Record<string, unknown>> {
  return once(proc, 'message').then(([message]) => message as Record<string, unknown>);
}

async function ask(sender: ChildProcess, request: Record<string, unknown>): Promise<number> {
  const answer = next(sender);
  sender.send(request);
  const reply = await answer;
  if (typeof reply.cpuMs !== 'number') throw new Error(`sender failed: ${String(reply.error)}`);
  return reply.cpuMs;
}

async function stop(proc: ChildProcess, message?: unknown): Promise<void> {
  const exited = once(proc, 'exit');
  if (message) proc.send(message);
  else proc.kill();
  await exited;
}

function bufferutilInstalled(): boolean {
  try {
    createRequire(import.meta.url)('bufferutil');
    return true;
  } catch {
    return false;
  }
}

export default async function (): Promise<void> {
  // --- 1. the encoder, by piece size ------------------------------------------------------
  const audio = Buffer.alloc(TOTAL, 0x35);
  const fast = {
    name: `bare base64 + JSON + frame bytes, ${APPEND_PIECE_BYTES / 1024} KiB pieces`,
    units: TOTAL,
    run: () => {
      let n = 0;
      for (let at = 0; at < TOTAL; at += APPEND_PIECE_BYTES) {
        n += Buffer.from(`{"type":"input_audio_buffer.append","audio":"${audio.subarray(at, at + APPEND_PIECE_BYTES).toString('base64')}"}`).length;
      }
      return n;
    },
  };
  const byHand = (piece: number) => ({
    name: `bare base64 + JSON + frame bytes, ${piece / 1024} KiB pieces`,
    units: TOTAL,
    run: () => {
      let n = 0;
      for (let at = 0; at < TOTAL; at += piece) {
        n += Buffer.from(`{"type":"input_audio_buffer.append","audio":"${audio.subarray(at, at + piece).toString('base64')}"}`).length;
      }
      return n;
    },
  });
  for (const kib of [1, 4, 16, 64, 96, 128, 256]) {
    const piece = kib * 1024;
    const subject = {
      name: `encodeAudioAppend, ${kib} KiB pieces`,
      units: TOTAL,
      run: () => {
        let n = 0;
        for (let at = 0; at < TOTAL; at += piece) n += Buffer.from(encodeAudioAppend(audio.subarray(at, at + piece))).length;
        return n;
      },
    };
    const options = { clock: 'cpu', rounds: 5, minRoundMs: 300 } as const;
    await compare(`encodeAudioAppend + frame bytes, 16 MiB in ${kib} KiB appends, vs by hand`, subject, byHand(piece), {
      ...options,
      target: 1.5,
      label: `encodeAudioAppend ${kib} KiB vs by hand`,
    });
    if (piece !== APPEND_PIECE_BYTES) {
      await compare(`encodeAudioAppend + frame bytes, 16 MiB in ${kib} KiB appends, vs the fast path`, subject, fast, {
        ...options,
        label: `encodeAudioAppend ${kib} KiB vs the ${APPEND_PIECE_BYTES / 1024} KiB fast path`,
      });
    }
  }

  // --- 2 and 3. end to end ----------------------------------------------------------------
  const peer = child('./concurrency-peer.js');
  const ready = await next(peer);
  const url = String(ready.realtimeUrl);
  const withUtil = bufferutilInstalled();
  const senders: Array<[string, ChildProcess]> = [['ws without bufferutil', child('./append-sender.js', { APPEND_KEY: KEY, WS_NO_BUFFER_UTIL: '1' })]];
  if (withUtil) senders.push(['ws with bufferutil', child('./append-sender.js', { APPEND_KEY: KEY })]);
  else console.log('bufferutil is not installed: the masking comparison is skipped');
  try {
    for (const [, sender] of senders) await next(sender);
    const rounds = 3;
    const figures = new Map<string, number>();
    for (const [name, sender] of senders) {
      console.log(`\n${name}:`);
      for (const writeBytes of [1024, 64 * 1024, 1024 * 1024, 4 * 1024 * 1024]) {
        const appendBytes = Math.min(writeBytes, APPEND_PIECE_BYTES);
        const bare = await ask(sender, { url, mode: 'bare', writeBytes: appendBytes, maxAppendBytes: appendBytes, totalBytes: TOTAL, rounds });
        figures.set(`${name} bare ${appendBytes}`, bare);
        console.log(`  bare ws client, 16 MiB in ${appendBytes / 1024} KiB appends: ${bare.toFixed(1)} ms CPU (${(TOTAL / 1e3 / bare).toFixed(0)} MB/s)`);
        for (const maxAppendBytes of [256 * 1024, APPEND_PIECE_BYTES]) {
          if (writeBytes <= APPEND_PIECE_BYTES && maxAppendBytes !== APPEND_PIECE_BYTES) continue; // the same appends
          const ms = await ask(sender, { url, mode: 'stream', writeBytes, maxAppendBytes, totalBytes: TOTAL, rounds });
          figures.set(`${name} ${writeBytes} ${maxAppendBytes}`, ms);
          const ratio = ms / bare;
          console.log(
            `  RealtimeTranslateStream, ${writeBytes / 1024} KiB writes, appends of at most ${maxAppendBytes / 1024} KiB: ` +
              `${ms.toFixed(1)} ms CPU (${(TOTAL / 1e3 / ms).toFixed(0)} MB/s), ratio to the bare client ${ratio.toFixed(2)}`,
          );
          if (name === senders[0]![0]) {
            record({
              name: `stream ${writeBytes / 1024} KiB writes, ${maxAppendBytes / 1024} KiB appends / bare client (${name})`,
              value: ratio,
              kind: 'max',
              bound: maxAppendBytes === APPEND_PIECE_BYTES ? 1.3 : undefined,
            });
          }
        }
      }
    }
    if (withUtil) {
      const without = figures.get(`ws without bufferutil bare ${APPEND_PIECE_BYTES}`)!;
      const withIt = figures.get(`ws with bufferutil bare ${APPEND_PIECE_BYTES}`)!;
      const streamWithout = figures.get(`ws without bufferutil ${1024 * 1024} ${APPEND_PIECE_BYTES}`)!;
      const streamWith = figures.get(`ws with bufferutil ${1024 * 1024} ${APPEND_PIECE_BYTES}`)!;
      console.log(
        `\nbufferutil: bare client ${withIt.toFixed(1)} ms with, ${without.toFixed(1)} ms without (ratio ${(withIt / without).toFixed(2)}); ` +
          `stream, 1 MiB writes: ${streamWith.toFixed(1)} ms with, ${streamWithout.toFixed(1)} ms without (ratio ${(streamWith / streamWithout).toFixed(2)})`,
      );
      record({ name: 'bufferutil: bare client CPU with / without', value: withIt / without, kind: 'max', bound: undefined });
      record({ name: 'bufferutil: stream CPU with / without (1 MiB writes)', value: streamWith / streamWithout, kind: 'max', bound: undefined });
    }
  } finally {
    for (const [, sender] of senders) await stop(sender);
    await stop(peer, { type: 'exit' });
  }
}
