/**
 * FlacDownloadStream with `decode: true` (HTTP from a local file-store server, resume
 * bookkeeping, on-the-fly decoding to PCM16, MD5 check) against:
 * - libFLAC's WebAssembly build (`@wasm-audio-decoders/flac`, the decoder the library used
 *   before its own) called directly on the whole file in memory (`decodeFile`, Float32 out, no
 *   HTTP, no conversion, no MD5);
 * - the library's own decoder (`FlacPcmDecoder`) on the whole file in memory, MD5 included:
 *   what the download and the streaming add to the decoding itself. Both carry the target of
 *   1.1; against this one it includes the HTTP request and the reads of the body (about 1 ms
 *   of CPU for this 382 KB file, a tenth of its decoding), which the baseline does without.
 * The file is served by another process (`file-server.ts`), so this process's CPU time is the
 * client's; the wall clock is printed too.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { FLACDecoder } from '@wasm-audio-decoders/flac';
import { Agent } from 'undici';
import { compare } from './harness.js';
import { synthesizeFlac } from '../lib/emulator/synth.js';
import { FlacDownloadStream } from '../lib/http/flac-download-stream.js';
import { FlacPcmDecoder } from '../lib/audio/flac-decoder.js';

const AUDIO_SECONDS = 20;
const SAMPLE_RATE = 48000;

export default async function (): Promise<void> {
  // The same file the server process makes: synthesis is deterministic.
  const flac = synthesizeFlac('bench', { sampleRate: SAMPLE_RATE, durationMs: AUDIO_SECONDS * 1000 });
  const server = fork(fileURLToPath(new URL('./file-server.js', import.meta.url)), [], {
    env: { ...process.env, FLAC_SECONDS: String(AUDIO_SECONDS), FLAC_RATE: String(SAMPLE_RATE) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [ready] = (await once(server, 'message')) as [{ url: string; bytes: number }];
  if (ready.bytes !== flac.length) throw new Error('the file server made another file');
  const url = ready.url;
  const agent = new Agent();
  const pcmBytes = AUDIO_SECONDS * SAMPLE_RATE * 2;

  try {
    const subject = {
      name: 'FlacDownloadStream, decode: true, over loopback HTTP',
      units: pcmBytes,
      run: async () => {
        let bytes = 0;
        for await (const chunk of new FlacDownloadStream({ url, dispatcher: agent, decode: true })) bytes += (chunk as Buffer).length;
        if (bytes !== pcmBytes) throw new Error(`decoded ${bytes} bytes, expected ${pcmBytes}`);
      },
    };
    const baseline = {
      name: 'FLACDecoder.decodeFile on the whole file in memory',
      units: pcmBytes,
      run: async () => {
        const decoder = new FLACDecoder();
        await decoder.ready;
        const decoded = await decoder.decodeFile(flac);
        decoder.free();
        if (decoded.samplesDecoded * 2 !== pcmBytes) throw new Error('short decode');
      },
    };
    const title = `FlacDownloadStream decode (${AUDIO_SECONDS} s mono ${SAMPLE_RATE / 1000} kHz, ${(flac.length / 1024).toFixed(0)} KiB FLAC)`;
    const options = { unit: 'x realtime', audioSeconds: AUDIO_SECONDS, rounds: 9, minRoundMs: 300 } as const;
    await compare(`${title}, CPU time`, subject, baseline, {
      ...options,
      clock: 'cpu',
      target: 1.1,
      label: 'FlacDownloadStream download + decode + MD5 vs decodeFile, CPU',
    });
    await compare(`${title}, wall clock`, subject, baseline, {
      ...options,
      target: 1.1,
      label: 'FlacDownloadStream download + decode + MD5 vs decodeFile, wall clock',
    });
    const own = {
      name: "FlacPcmDecoder (the library's decoder) on the whole file in memory, MD5 checked",
      units: pcmBytes,
      run: async () => {
        const decoder = new FlacPcmDecoder();
        const bytes = (await decoder.decode(flac)).length + (await decoder.end()).length;
        decoder.verify();
        await decoder.close();
        if (bytes !== pcmBytes) throw new Error(`decoded ${bytes} bytes, expected ${pcmBytes}`);
      },
    };
    await compare(`${title}, CPU time, vs the same decoder in memory`, subject, own, {
      ...options,
      clock: 'cpu',
      target: 1.1,
      label: 'FlacDownloadStream download + decode + MD5 vs its decoder in memory, CPU',
    });
  } finally {
    await agent.close();
    const exited = once(server, 'exit');
    server.kill();
    await exited;
  }
}
