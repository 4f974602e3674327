/**
 * How long `rt-translate` takes to exit after the service's last answer, scenario by scenario,
 * against the independent reference server (`test/reference-server/`) and the embedded
 * emulator's segmentation modes: the figures the ending rule is judged by (the tests check the
 * same scenarios; this prints the times).
 *
 *   npm run build && node dist/scripts/ending-times.js [--client PATH]
 *
 * Each scenario spawns the command (`--client`, default the built one) with the speech fixture,
 * sent as fast as it is read or spoken sentence by sentence (each once the service's transcript
 * of the one before has been printed), and prints the exit status, the responses and the time
 * from the last response's end (`response.audio.done` as the server sent it, or the last
 * translation line for the emulator) to the exit.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startEmulator, type EmulatorOptions } from '../lib/emulator/server.js';
import { startReferenceServer, type ReferenceServerOptions } from '../test/reference-server/index.js';

const root = new URL('../../', import.meta.url);
const wav = readFileSync(new URL('test/fixtures/speech-en-24k.wav', root));
const pcm = wav.subarray(44);
const meta = JSON.parse(readFileSync(new URL('test/fixtures/speech-en-24k.json', root), 'utf8')) as { utterances: Array<{ startSample: number }> };
const clientAt = process.argv.indexOf('--client');
const client = clientAt > 0 ? process.argv[clientAt + 1]! : fileURLToPath(new URL('dist/bin/rt-translate.js', root));

/** The fixture in three parts, each later one 200 ms into its sentence. */
const parts = (() => {
  const cuts = meta.utterances.slice(1).map((u) => (u.startSample + 4800) * 2);
  const edges = [0, ...cuts, pcm.length];
  return edges.slice(1).map((end, i) => pcm.subarray(edges[i]!, end));
})();

interface Outcome {
  code: number | null;
  exitAt: number;
  lastLineAt: number | undefined;
  stderr: string;
}

/** Runs the command; with `spoken`, writes each part of the input once the transcripts before it were printed. */
function run(args: string[], spoken: boolean): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [client, '--from', 'en-us', '--to', 'es-es', ...args], { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    let lastLineAt: number | undefined;
    let next = 0;
    const feed = () => {
      const said = (stderr.match(/^transcript \(/gm) ?? []).length;
      while (next < parts.length && said >= next) child.stdin.write(parts[next++]!);
      if (next === parts.length) child.stdin.end();
    };
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      stderr += text;
      if (/^translation \(/m.test(text)) lastLineAt = Date.now();
      if (spoken) feed();
    });
    child.stdin.on('error', () => undefined);
    if (spoken) feed();
    else child.stdin.end(pcm);
    child.on('exit', (code) => resolve({ code, exitAt: Date.now(), lastLineAt, stderr }));
  });
}

interface Row {
  scenario: string;
  spoken?: boolean;
  args?: string[];
  reference?: ReferenceServerOptions;
  emulator?: EmulatorOptions;
}

const ROWS: Row[] = [
  { scenario: 'a. file, one response once the appends stop (JSON)', reference: { answer: 'idle' } },
  { scenario: 'a. file, one response once the appends stop (binary)', reference: { answer: 'idle', audio: 'binary' } },
  { scenario: 'b. file, utterance by utterance', reference: { answer: 'utterance' } },
  { scenario: 'c. spoken, the last answered 8 s late', spoken: true, reference: { last: { lateMs: 8000 } } },
  { scenario: 'd. spoken, each answered promptly', spoken: true, reference: { answer: 'utterance', audio: 'binary' } },
  { scenario: 'e. file, long sentences split in two', reference: { answer: 'split' } },
  { scenario: 'e. file, two of three merged', reference: { answer: 'merge', mergeCount: 2 } },
  { scenario: 'e. spoken, two of three merged', spoken: true, reference: { answer: 'merge', mergeCount: 2 } },
  { scenario: 'f. spoken, the last never answered', spoken: true, reference: { last: 'never' } },
  { scenario: 'text only, one response', args: ['--text-only'], reference: { answer: 'idle' } },
  { scenario: 'cold start 2 s, one response', reference: { answer: 'idle', coldStartMs: 2000 } },
  { scenario: 'emulator: a. file, segmentation idle', emulator: { segmentation: 'idle' } },
  { scenario: 'emulator: b. file, one answer per utterance (the default)', emulator: {} },
  { scenario: 'emulator: c. spoken, the last answered 8 s late', spoken: true, emulator: { lastAnswer: { lateMs: 8000 } } },
  { scenario: 'emulator: d. spoken, each answered promptly', spoken: true, emulator: {} },
  { scenario: 'emulator: e. file, segmentation split', emulator: { segmentation: 'split' } },
  { scenario: 'emulator: e. file, two of three merged', emulator: { faults: { mergeUtterances: 2 } } },
  { scenario: 'emulator: f. spoken, the last never answered', spoken: true, emulator: { lastAnswer: 'never' } },
  { scenario: 'emulator: a. file, segmentation idle, a drop after 4 s of input', emulator: { segmentation: 'idle', faults: { dropAfterInputMs: 4000 } } },
];

async function measure(row: Row): Promise<string> {
  if (row.reference) {
    const server = await startReferenceServer(row.reference);
    try {
      const outcome = await run([...(row.args ?? []), '--realtime-url', server.realtimeUrl, '--api-key', server.apiKey], row.spoken === true);
      const last = server.responses.at(-1)?.doneAt;
      return line(row.scenario, outcome, server.responses.length, last);
    } finally {
      await server.close();
    }
  }
  const emulator = await startEmulator({ apiKeys: ['ending-times'], ...row.emulator });
  try {
    const outcome = await run([...(row.args ?? []), '--realtime-url', emulator.realtimeUrl, '--api-key', 'ending-times'], row.spoken === true);
    const responses = (outcome.stderr.match(/^translation \(/gm) ?? []).length;
    return line(row.scenario, outcome, responses, outcome.lastLineAt);
  } finally {
    await emulator.close();
  }
}

function line(scenario: string, outcome: Outcome, responses: number, lastDoneAt: number | undefined): string {
  const after = lastDoneAt === undefined ? 'n/a' : `${((outcome.exitAt - lastDoneAt) / 1000).toFixed(2)} s`;
  const warning = /warning: (.*)/.exec(outcome.stderr)?.[1];
  return `| ${scenario} | ${outcome.code} | ${responses} | ${after} |${warning ? ` ${warning.slice(0, 90)}` : ''}`;
}

console.log(`client: ${client}`);
console.log('| scenario | exit | responses | last answer to exit | warning');
console.log('|---|---|---|---|---');
for (const row of ROWS) console.log(await measure(row));
