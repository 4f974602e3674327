/**
 * `rt-translate emulator`: runs the local emulator of the service until SIGINT or SIGTERM.
 * Prints exactly one JSON line, `{"baseUrl":...,"realtimeUrl":...}`, once it listens. With
 * `--reset`, forgets what the embedded emulator remembers (`../embedded-emulator.ts`) instead.
 * Flags map one to one onto `startEmulator` options; each is checked here with a usage error
 * naming the flag, and the emulator checks the options again.
 */
import { existsSync, rmSync } from 'node:fs';
import { ENV_API_KEY, ENV_BASE_URL, ENV_REALTIME_URL } from '../../lib/index.js';
import {
  startEmulator,
  EMULATOR_DEFAULT_API_KEY,
  SEGMENTATIONS,
  type LastAnswer,
  type RealtimeEmulatorOptions,
  type RealtimeFaults,
  type Segmentation,
} from '../../lib/emulator/index.js';
import { EXIT_OK, UsageError, intFlag, numberFlag, parseCommandLine, untilStopped, type CliIo } from '../cli.js';
import { NO_STATE_DIR, emulatorStateDir } from '../embedded-emulator.js';

export const EMULATOR_USAGE = `Usage: rt-translate emulator [options]      run the local emulator of the service
       rt-translate emulator --reset        forget what the embedded emulator remembers

  --host H                interface to listen on (default 127.0.0.1)
  --port N                port (default 0: a free port)
  --api-key KEY           a key the emulator accepts; repeat for several
                          (default: ${EMULATOR_DEFAULT_API_KEY})
  --credit-seconds S      stop each realtime session after S seconds of audio (billing stop)
  --cold-start-ms MS      send session.starting, then session.created after MS
  --latency-ms MS         delay before each realtime response
  --audio-frames F        output audio as 'json' base64 deltas (default) or 'binary' frames
  --task-ms MS            time an HTTP task stays PENDING before its outcome (default 2000)
  --url-ttl-s S           lifetime of presigned result URLs, seconds (default 3600); expired
                          URLs answer 403
  --rate-limit N          HTTP requests per second per key before 429 (default 0: unlimited;
                          below 1, e.g. 0.5: one request, then one every 1/N seconds)
  --cloned-voice ID       a custom voice every accepted key owns, so \`rt-translate --voice ID\`
                          and delete-voice can be tried offline; repeat for several. Voices made
                          with POST /create-custom-voice are owned by the key that made them.

How the realtime service cuts the audio and when it answers (each applies to every session):
  --segmentation MODE       utterance (default): answer each utterance when it ends;
                            idle: answer everything heard as one response once the
                            appends pause for the idle time; split: answer an utterance
                            whose voiced span reaches --split-ms at once, the rest when it
                            ends (two responses)
  --split-ms MS             with --segmentation split (default 700)
  --vad-silence-ms MS       unvoiced time that ends an utterance (default 900)
  --vad-threshold-dbfs=DB   RMS level at or above which a 30 ms frame is voice, at most 0
                            (default -45; give a negative value with =)
  --idle-ms MS              appends paused this long while the emulator reads mean the
                            audio stopped: the utterance in progress is answered (default 300)
  --never-answer-last       hold each answer until speech is heard again; the one still
                            held when the appends pause is never sent
  --late-last MS            the same, but the last answer is sent MS after the pause

Realtime fault switches (each applies to every session, so a reconnected one fails again):
  --drop-after-ms MS        drop each session MS after session.created
  --drop-after-responses N  drop each session once it has sent N responses
  --drop-after-input-ms MS[:N]
                            drop a session once it has heard MS of input audio, the first N
                            sessions only (default 1): a drop in the middle of a file
  --drop-mid-response       with --drop-after-responses: cut in the middle of the next
                            response's audio instead
  --drop-code CODE          drop with this close code (1001 1011 1012 1013 ...) instead of
                            cutting the connection (the client sees 1006)
  --drop-reset              drop with a TCP reset: what was in flight is lost
  --half-open-after-ms MS   go half-open MS after session.created: read nothing, answer no
                            ping, send nothing (a server that vanished without closing)
  --refuse-handshakes N[:STATUS[:RETRY_AFTER_S]]
                            refuse the first N handshakes with STATUS (default 503; 401
                            and 429 are useful too), with Retry-After when given
  --refuse-after-drop N[:STATUS[:RETRY_AFTER_S]]
                            after each drop, refuse the next N handshakes (the client's
                            reconnects) with STATUS (default 503; 401 ends the client's
                            session, as a refused key is never retried)
  --stall-after-drop N      after each drop, leave the next N handshakes unanswered (the
                            client waits out its ready timeout); refusals come after them
  --merge-utterances N      answer every N utterances with one response (fewer once the
                            appends pause)
  --late-utterance N:MS     answer utterance N of each session MS late (repeatable)
  --echo-key                echo the caller's key in session.created and error messages
  --reset                   forget everything the embedded emulator remembers (its state
                            directory, below) and exit; no other option goes with it
  -h, --help

Prints {"baseUrl":"http://HOST:PORT","realtimeUrl":"ws://HOST:PORT","apiKeys":[...]} on one
line of standard output once it listens (and on standard error, the variables to set to use
it), then runs until SIGINT or SIGTERM. The HTTP interface is at baseUrl; its control
endpoints (no key) are under /_emulator/: faults, task-outcomes, tasks, file-faults, requests,
and realtime-faults, which triggers a realtime fault now:
  curl -X POST $BASE/_emulator/realtime-faults -d '{"refuse": 1, "status": 401}'
  (or {"stall": N}, {"drop": true, "code"?: CODE, "reset"?: true}, {"halfOpen": true}).

This emulator remembers nothing once it stops. The embedded one, which a command starts when no
service URL is configured, remembers what earlier commands made (custom voices, tasks and runs,
result files; run ids never repeat) in $XDG_STATE_HOME/rt-translate/emulator, else in
$HOME/.local/state/rt-translate/emulator; result files past 100 MiB are removed, the oldest first.
Records are written whole (a temporary file renamed), and commands running at once never take
the same run or voice id. No API key is ever kept there.`;

const OPTIONS = {
  host: { type: 'string' },
  port: { type: 'string' },
  'api-key': { type: 'string', multiple: true },
  'credit-seconds': { type: 'string' },
  'cold-start-ms': { type: 'string' },
  'latency-ms': { type: 'string' },
  'audio-frames': { type: 'string' },
  'task-ms': { type: 'string' },
  'url-ttl-s': { type: 'string' },
  'rate-limit': { type: 'string' },
  'cloned-voice': { type: 'string', multiple: true },
  'drop-after-ms': { type: 'string' },
  'drop-after-responses': { type: 'string' },
  'drop-after-input-ms': { type: 'string' },
  'drop-mid-response': { type: 'boolean' },
  'drop-code': { type: 'string' },
  'drop-reset': { type: 'boolean' },
  'half-open-after-ms': { type: 'string' },
  'refuse-handshakes': { type: 'string' },
  'refuse-after-drop': { type: 'string' },
  'stall-after-drop': { type: 'string' },
  'merge-utterances': { type: 'string' },
  'late-utterance': { type: 'string', multiple: true },
  'echo-key': { type: 'boolean' },
  segmentation: { type: 'string' },
  'split-ms': { type: 'string' },
  'vad-silence-ms': { type: 'string' },
  'vad-threshold-dbfs': { type: 'string' },
  'idle-ms': { type: 'string' },
  'never-answer-last': { type: 'boolean' },
  'late-last': { type: 'string' },
  reset: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** `N:MS` or `N[:A[:B]]` flag values: integers separated by colons. */
function intList(value: string, flag: string, shape: string, min: number, max: number): number[] {
  const parts = value.split(':');
  if (parts.length < min || parts.length > max || parts.some((p) => !/^\d+$/.test(p))) {
    throw new UsageError(`${flag} expects ${shape} (got "${value}").`);
  }
  return parts.map(Number);
}

function parseFaults(values: {
  'drop-after-ms'?: string;
  'drop-after-responses'?: string;
  'drop-after-input-ms'?: string;
  'drop-mid-response'?: boolean;
  'drop-code'?: string;
  'drop-reset'?: boolean;
  'half-open-after-ms'?: string;
  'refuse-handshakes'?: string;
  'refuse-after-drop'?: string;
  'stall-after-drop'?: string;
  'merge-utterances'?: string;
  'late-utterance'?: string[];
  'echo-key'?: boolean;
}): RealtimeFaults {
  const faults: RealtimeFaults = {};
  const dropAfterMs = intFlag(values['drop-after-ms'], '--drop-after-ms', 0);
  if (dropAfterMs !== undefined) faults.dropAfterMs = dropAfterMs;
  const dropAfterResponses = intFlag(values['drop-after-responses'], '--drop-after-responses', 0);
  if (dropAfterResponses !== undefined) faults.dropAfterResponses = dropAfterResponses;
  if (values['drop-after-input-ms'] !== undefined) {
    const [ms, drops] = intList(values['drop-after-input-ms'], '--drop-after-input-ms', 'MS[:N] (N at least 1)', 1, 2);
    if (drops === 0) throw new UsageError(`--drop-after-input-ms expects MS[:N] (N at least 1) (got "${values['drop-after-input-ms']}").`);
    faults.dropAfterInputMs = ms!;
    if (drops !== undefined) faults.dropsAfterInput = drops;
  }
  if (values['drop-mid-response'] === true) faults.dropMidResponse = true;
  const dropCode = intFlag(values['drop-code'], '--drop-code', 1000);
  if (dropCode !== undefined) faults.dropCode = dropCode;
  if (values['drop-reset'] === true) faults.dropReset = true;
  const halfOpenAfterMs = intFlag(values['half-open-after-ms'], '--half-open-after-ms', 0);
  if (halfOpenAfterMs !== undefined) faults.halfOpenAfterMs = halfOpenAfterMs;
  // Both refusals answer with one status and Retry-After: the two flags must not disagree.
  const refusals = [
    ['--refuse-handshakes', values['refuse-handshakes'], 'refuseHandshakes'],
    ['--refuse-after-drop', values['refuse-after-drop'], 'refuseAfterDrop'],
  ] as const;
  for (const [flag, value, field] of refusals) {
    if (value === undefined) continue;
    const [count, status, retryAfterS] = intList(value, flag, 'N[:STATUS[:RETRY_AFTER_S]]', 1, 3);
    faults[field] = count!;
    if (status !== undefined && status !== (faults.refuseStatus ?? status)) {
      throw new UsageError(`--refuse-handshakes and --refuse-after-drop refuse with one status: give it once, or the same.`);
    }
    if (retryAfterS !== undefined && retryAfterS !== (faults.refuseRetryAfterS ?? retryAfterS)) {
      throw new UsageError(`--refuse-handshakes and --refuse-after-drop send one Retry-After: give it once, or the same.`);
    }
    if (status !== undefined) faults.refuseStatus = status;
    if (retryAfterS !== undefined) faults.refuseRetryAfterS = retryAfterS;
  }
  const stallAfterDrop = intFlag(values['stall-after-drop'], '--stall-after-drop', 1);
  if (stallAfterDrop !== undefined) faults.stallAfterDrop = stallAfterDrop;
  const merge = intFlag(values['merge-utterances'], '--merge-utterances', 1);
  if (merge !== undefined) faults.mergeUtterances = merge;
  if (values['late-utterance']) {
    const late: Record<number, number> = {};
    for (const item of values['late-utterance']) {
      const [index, delay] = intList(item, '--late-utterance', 'N:MS', 2, 2);
      late[index!] = delay!;
    }
    faults.lateUtterances = late;
  }
  if (values['echo-key'] === true) faults.echoKey = true;
  return faults;
}

/** The segmentation flags as emulator options (only those given). */
function parseSegmentation(values: {
  segmentation?: string;
  'split-ms'?: string;
  'vad-silence-ms'?: string;
  'vad-threshold-dbfs'?: string;
  'idle-ms'?: string;
  'never-answer-last'?: boolean;
  'late-last'?: string;
}): RealtimeEmulatorOptions {
  const options: RealtimeEmulatorOptions = {};
  const mode = values.segmentation;
  if (mode !== undefined) {
    if (!(SEGMENTATIONS as readonly string[]).includes(mode))
      throw new UsageError(`--segmentation expects ${SEGMENTATIONS.join(', ').replace(/, (\w+)$/, ' or $1')} (got "${mode}").`);
    options.segmentation = mode as Segmentation;
  }
  const splitMs = intFlag(values['split-ms'], '--split-ms', 1);
  if (splitMs !== undefined) {
    if (options.segmentation !== 'split') throw new UsageError('--split-ms applies to --segmentation split only: give both, or neither.');
    options.splitMs = splitMs;
  }
  const silenceMs = intFlag(values['vad-silence-ms'], '--vad-silence-ms', 1);
  if (silenceMs !== undefined) options.vadSilenceMs = silenceMs;
  const threshold = values['vad-threshold-dbfs'];
  if (threshold !== undefined) {
    const dbfs = Number(threshold);
    if (threshold.trim() === '' || !Number.isFinite(dbfs) || dbfs > 0) {
      throw new UsageError(`--vad-threshold-dbfs expects a number of dBFS, at most 0, e.g. --vad-threshold-dbfs=-50 (got "${threshold}").`);
    }
    options.vadThresholdDbfs = dbfs;
  }
  const idleMs = intFlag(values['idle-ms'], '--idle-ms', 1);
  if (idleMs !== undefined) options.idleMs = idleMs;
  const lateMs = intFlag(values['late-last'], '--late-last', 0);
  if (lateMs !== undefined && values['never-answer-last'] === true) {
    throw new UsageError('--never-answer-last and --late-last say opposite things of the last answer: give one.');
  }
  const lastAnswer: LastAnswer | undefined = lateMs !== undefined ? { lateMs } : values['never-answer-last'] === true ? 'never' : undefined;
  if (lastAnswer !== undefined) options.lastAnswer = lastAnswer;
  return options;
}

/** `--reset`: removes the embedded emulator's state directory, saying which. */
function resetState(io: CliIo): number {
  const dir = emulatorStateDir(io.env);
  if (dir === undefined) throw new UsageError(`--reset: the embedded emulator has no state directory to forget (${NO_STATE_DIR}).`);
  if (!existsSync(dir)) {
    io.stderr.write(`rt-translate emulator: nothing to forget: ${dir} does not exist\n`);
    return EXIT_OK;
  }
  rmSync(dir, { recursive: true, force: true });
  io.stderr.write(`rt-translate emulator: forgot what the embedded emulator remembered: removed ${dir}\n`);
  return EXIT_OK;
}

export async function runEmulator(args: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseCommandLine({ args, options: OPTIONS, strict: true }, 'rt-translate emulator --help');
  if (values.help) {
    io.stdout.write(`${EMULATOR_USAGE}\n`);
    return EXIT_OK;
  }
  if (values.reset) {
    if (args.length !== 1) throw new UsageError("--reset goes alone: it forgets the embedded emulator's state and exits.");
    return resetState(io);
  }
  const audioFrames = values['audio-frames'];
  if (audioFrames !== undefined && audioFrames !== 'json' && audioFrames !== 'binary') {
    throw new UsageError(`--audio-frames expects json or binary (got "${audioFrames}").`);
  }
  const port = intFlag(values.port, '--port', 0);
  if (port !== undefined && port > 65535) throw new UsageError(`--port expects 0 to 65535 (got "${values.port}").`);
  const creditSeconds = numberFlag(values['credit-seconds'], '--credit-seconds', 0);
  const coldStartMs = intFlag(values['cold-start-ms'], '--cold-start-ms', 0);
  const latencyMs = intFlag(values['latency-ms'], '--latency-ms', 0);
  const taskMs = intFlag(values['task-ms'], '--task-ms', 0);
  const urlTtlS = numberFlag(values['url-ttl-s'], '--url-ttl-s', 0);
  const rateLimit = numberFlag(values['rate-limit'], '--rate-limit', 0);
  const voiceIds = (values['cloned-voice'] ?? []).map((id) => {
    if (!/^\d+$/.test(id)) throw new UsageError(`--cloned-voice expects a positive integer voice id (got "${id}").`);
    return intFlag(id, '--cloned-voice', 1)!;
  });
  const keys = values['api-key'] ?? [EMULATOR_DEFAULT_API_KEY];
  const faults = parseFaults(values);
  const segmentation = parseSegmentation(values);

  const emulator = await startEmulator({
    ...(values.host !== undefined ? { host: values.host } : {}),
    ...(port !== undefined ? { port } : {}),
    ...(values['api-key'] ? { apiKeys: values['api-key'] } : {}),
    ...(creditSeconds !== undefined ? { creditSeconds } : {}),
    ...(coldStartMs !== undefined ? { coldStartMs } : {}),
    ...(latencyMs !== undefined ? { latencyMs } : {}),
    ...(audioFrames !== undefined ? { audioFrames } : {}),
    ...(taskMs !== undefined ? { taskMs } : {}),
    ...(urlTtlS !== undefined ? { urlTtlS } : {}),
    ...(rateLimit !== undefined ? { rateLimit } : {}),
    ...(voiceIds.length > 0 ? { clonedVoices: Object.fromEntries(keys.map((key) => [key, voiceIds])) } : {}),
    ...segmentation,
    faults,
  });
  const apiKeys = values['api-key'] ?? [EMULATOR_DEFAULT_API_KEY];
  io.stdout.write(`${JSON.stringify({ baseUrl: emulator.baseUrl, realtimeUrl: emulator.realtimeUrl, apiKeys })}\n`);
  // The emulator's keys are the user's own choice (or the documented default): saying them is
  // what makes the emulator usable without reading its source.
  io.stderr.write(
    `rt-translate emulator: listening; it accepts the API ${apiKeys.length === 1 ? 'key' : 'keys'} ${apiKeys.join(', ')}. To use it:\n` +
      `  export ${ENV_REALTIME_URL}=${emulator.realtimeUrl} ${ENV_BASE_URL}=${emulator.baseUrl} ${ENV_API_KEY}=${apiKeys[0]}\n`,
  );

  try {
    await untilStopped(io, signal);
  } finally {
    await emulator.close();
  }
  return EXIT_OK;
}
