/**
 * CPU per session-hour and event-loop lag for N concurrent sessions at real time, on each path,
 * each against a bare `ws` client doing the same work by hand:
 * - `plain`: `RealtimeTranslateStream` fed PCM16 mono 24 kHz; `bare`: a `ws` client doing the
 *   protocol's JSON and base64 work by hand;
 * - `twilio`: `TwilioMediaBridge` + `bridgeTwilioSocket` behind a `ws` server, the calls coming
 *   from another process (20 ms mu-law `media` messages at real time, marks echoed);
 *   `bare-twilio`: the same bridging by hand (`openBareTwilio`);
 * - `discord`: `translateSpeaker` (Opus packets in as a voice receiver gives them, nothing
 *   during silence; 48 kHz stereo PCM frames out, as `StreamType.Raw` takes them);
 *   `bare-discord`: the same by hand (`openBareDiscord`).
 * The plain path and its bare client write 20 ms frames, each its own append (`PLAIN_FRAMES`); the
 * Twilio and Discord paths send 100 ms appends (`APPEND_FRAMES`), as the adapters do.
 * Every source sends the speech fixture in 20 ms frames at real time, each session from its own
 * point of the speech and phase of the 20 ms grid. The emulator runs in a process of its own
 * (`concurrency-peer.ts`), the phone callers in another, both for the whole run. Each window is
 * measured in a fresh process (`concurrency-window.ts`), so that no path runs in a process another
 * path has shaped: over a window after a warm-up, CPU time (user + system) per hour of session
 * time, the share of one core, and the event loop's lag (p99 and max, `monitorEventLoopDelay`).
 * In the rows each path runs at the same time as its baseline, both windows starting together
 * (the one that warmed up first waits), so that what the machine does meanwhile falls on both.
 * Before each window the emulator's and the callers' processes run a full garbage collection, so
 * no window pays for the garbage of the one before.
 *
 * The Discord path also decodes Opus, work any Discord client does, and so does its by-hand
 * path; the bare decode of the same packets is timed and printed for scale. Each path's figure
 * is the mean CPU of its windows over that of the same work by hand (and, for the plain path,
 * the worst lag p99 over the bare client's: measured side by side, each window's lag also holds
 * the other's load). Environment: `CONCURRENCY` (default "50,100,200"),
 * `CONCURRENCY_PLAIN_FRAMES` (frames per write of the plain path and its bare client, default 1),
 * `CONCURRENCY_SECONDS` (measured window, default 20), `CONCURRENCY_WARMUP_SECONDS` (after all
 * sessions started, before the window, default 15), `CONCURRENCY_TWILIO_MAX` (the
 * calls-on-one-core scenario, run first, one window at a time against the same work by hand at
 * the same load; default 500, 0 to skip; it starts with `CONCURRENCY_TWILIO_WARMUP_ROUNDS`
 * unmeasured rounds of 10 s windows, default 1), `CONCURRENCY_PATHS` (default
 * "bare,plain,bare-twilio,twilio,bare-discord,discord"), `CONCURRENCY_ROUNDS` (windows per
 * path, default 2), `CONCURRENCY_TOGETHER` (default 1: each path beside its baseline; 0: one
 * window at a time, the order reversed every other round), `CONCURRENCY_PROFILE` (a directory:
 * each measured window's CPU profile is written there).
 */
import { createOpusCodec } from '../lib/audio/opus.js';
import { cpuMsNow, record } from './harness.js';
import { Peer } from './ipc.js';
import { WARMUP_MS, connectLimitMs, opusMaterial, type OpusMaterial, type PathName, type Scenario } from './concurrency-shared.js';

/** Each path of the library, the same work by hand it is measured against, and the figure's name. */
const PAIRS: ReadonlyArray<{ path: PathName; baseline: PathName; name: string }> = [
  { path: 'plain', baseline: 'bare', name: 'plain / bare ws client' },
  { path: 'twilio', baseline: 'bare-twilio', name: 'twilio / bare twilio bridge (the same work by hand)' },
  { path: 'discord', baseline: 'bare-discord', name: 'discord / bare discord path (the same work by hand)' },
];

// --- the other processes --------------------------------------------------------------------

/**
 * The emulator's process and the phone callers' (each runs `concurrency-peer.ts`), for the whole
 * run; the emulator's URL.
 */
interface Peers {
  emulator: Peer;
  callers: Peer;
  realtimeUrl: string;
}

// --- measuring ------------------------------------------------------------------------------

/**
 * One window of each of `paths` with `n` sessions each, all measured at the same time, each in a
 * fresh process of its own (`concurrency-window.ts`): every window starts once all of them have
 * warmed up. Before it, the emulator's and the callers' processes run a full garbage collection,
 * so that the window does not pay for the garbage the previous one left there. The Twilio paths'
 * calls come from the callers' process: this process passes each window's request on (with the
 * window's id, as several may be calling at once), and the answer back.
 */
async function measure(paths: readonly PathName[], n: number, seconds: number, peers: Peers): Promise<Scenario[]> {
  await Promise.all([peers.emulator.link.request({ type: 'collect' }, 'collected'), peers.callers.link.request({ type: 'collect' }, 'collected')]);
  const windows = paths.map(() => new Peer('./concurrency-window.js'));
  // Every wait below ends when a window exits; a window that neither answers nor exits is killed
  // once it has had all the time its sessions may take to start, plus the window, plus 2 min.
  const limitMs = connectLimitMs(n) + WARMUP_MS + seconds * 1000 + 120_000;
  const limit = setTimeout(() => {
    for (const w of windows) w.child.kill();
  }, limitMs);
  try {
    await Promise.all(windows.map((w) => w.link.next('ready')));
    const warm = Promise.all(windows.map((w) => w.link.next('warm')));
    windows.forEach((window, id) => {
      window.child.on('message', (message: { type: string }) => {
        if (message.type !== 'callers') return;
        peers.callers.link.request({ ...message, id }, 'callers-done', id).then(
          (stats) => window.link.send(stats),
          (error: unknown) => window.link.send({ type: 'error', message: String(error) }),
        );
      });
    });
    const measured = windows.map((w, i) =>
      w.link.request({ type: 'measure', path: paths[i], sessions: n, seconds, realtimeUrl: peers.realtimeUrl }, 'measured'),
    );
    // Every window starts together, once the slowest has warmed up; a window that failed first
    // rejects here rather than leave the others waiting for it.
    await Promise.race([warm, Promise.all(measured)]);
    for (const w of windows) w.link.send({ type: 'go' });
    return (await Promise.all(measured)).map((answer) => answer.scenario as unknown as Scenario);
  } finally {
    clearTimeout(limit);
    await Promise.all(windows.map((w) => w.close()));
  }
}

/**
 * The paths measured together in one round: each path with its baseline (the same work by
 * hand), when both are asked for; any other path alone.
 */
function groupsOf(paths: readonly PathName[]): PathName[][] {
  const groups: PathName[][] = [];
  const placed = new Set<PathName>();
  for (const path of paths) {
    if (placed.has(path)) continue;
    const paired = (a: PathName, b: PathName) => PAIRS.some((p) => (p.path === a && p.baseline === b) || (p.path === b && p.baseline === a));
    const partner = paths.find((other) => !placed.has(other) && paired(path, other));
    const group = partner ? [path, partner] : [path];
    for (const p of group) placed.add(p);
    groups.push(group);
  }
  return groups;
}

/** CPU seconds per hour of speaker timeline for the bare Opus decode of the packets. */
function opusDecodePerHour(opus: OpusMaterial): number {
  const codec = createOpusCodec({ backend: opus.backend });
  const rounds: number[] = [];
  for (let r = 0; r < 5; r++) {
    const c0 = cpuMsNow();
    let slots = 0;
    for (let pass = 0; pass < 4; pass++) {
      for (const packet of opus.packets) {
        if (packet) codec.decode(packet);
        slots++;
      }
    }
    rounds.push(((cpuMsNow() - c0) / 1000) * (3600 / ((slots * 20) / 1000)));
  }
  codec.close();
  return rounds.sort((a, b) => a - b)[2]!;
}

/** Several windows of one path: mean CPU and output, worst lag. */
function combine(list: Scenario[]): Scenario {
  const mean = (f: (s: Scenario) => number) => list.reduce((sum, s) => sum + f(s), 0) / list.length;
  return {
    ...list[0]!,
    started: Math.min(...list.map((s) => s.started)),
    cpuPerHour: mean((s) => s.cpuPerHour),
    corePercent: mean((s) => s.corePercent),
    outputPerSession: mean((s) => s.outputPerSession),
    lagP99: Math.max(...list.map((s) => s.lagP99)),
    lagMax: Math.max(...list.map((s) => s.lagMax)),
  };
}

/**
 * Measures each path with `n` sessions in `rounds` windows; prints every window, then (with
 * several rounds) each path's combined row. Returns the combined scenario of each path measured.
 * `together`: each path is measured at the same time as its baseline (`groupsOf`), so that what the
 * machine does meanwhile falls on both alike; otherwise one window at a time, the order reversed
 * every other round so that a change in the machine's load falls on every path.
 */
async function measureAlternating(
  paths: readonly PathName[],
  n: number,
  rounds: number,
  seconds: number,
  peers: Peers,
  options: { together: boolean; label?: string },
): Promise<Map<PathName, Scenario>> {
  const windows = new Map<PathName, Scenario[]>();
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? paths : [...paths].reverse();
    for (const group of options.together ? groupsOf(order) : order.map((path) => [path])) {
      for (const s of await measure(group, n, seconds, peers)) {
        windows.set(s.path, [...(windows.get(s.path) ?? []), s]);
        const note = [s.note, group.length > 1 ? `measured together with ${group.filter((p) => p !== s.path).join(', ')}` : '', options.label ?? ''];
        console.log(row({ ...s, note: note.filter(Boolean).join('; ') }));
      }
    }
  }
  const results = new Map<PathName, Scenario>([...windows].map(([path, list]) => [path, combine(list)]));
  if (rounds > 1) for (const s of results.values()) console.log(row({ ...s, note: `mean of ${rounds} windows (lag: the worst)` }));
  return results;
}

function row(s: Scenario): string {
  return (
    `  ${s.path.padEnd(12)} ${String(s.sessions).padStart(4)}  ${s.cpuPerHour.toFixed(1).padStart(7)} CPU-s/h  ` +
    `${s.corePercent.toFixed(1).padStart(5)} % core  lag p99 ${s.lagP99.toFixed(1).padStart(6)} ms, max ${s.lagMax.toFixed(0).padStart(4)} ms  ` +
    `out ${s.path.endsWith('twilio') ? `${s.outputPerSession.toFixed(1)} messages` : `${(s.outputPerSession / 1000).toFixed(1)} kB`}/s/session  ${s.note}`
  );
}

export default async function (): Promise<void> {
  const counts = (process.env.CONCURRENCY ?? '50,100,200')
    .split(',')
    .map(Number)
    .filter((v) => v > 0);
  const seconds = Number(process.env.CONCURRENCY_SECONDS ?? 20);
  const twilioMax = Number(process.env.CONCURRENCY_TWILIO_MAX ?? 500);
  const twilioWarmupRounds = Math.max(0, Number(process.env.CONCURRENCY_TWILIO_WARMUP_ROUNDS ?? 1));
  const requested = (process.env.CONCURRENCY_PATHS ?? 'bare,plain,bare-twilio,twilio,bare-discord,discord').split(',') as PathName[];
  const rounds = Math.max(1, Number(process.env.CONCURRENCY_ROUNDS ?? 2));
  const together = (process.env.CONCURRENCY_TOGETHER ?? '1') !== '0';
  const opus = opusMaterial();
  // Without an Opus backend the Discord paths cannot run: the others still do.
  const paths = requested.filter((path) => opus || !path.endsWith('discord'));
  const emulator = new Peer('./concurrency-peer.js');
  const callers = new Peer('./concurrency-peer.js');
  const [ready] = await Promise.all([emulator.link.next('ready'), callers.link.next('ready')]);
  const peers: Peers = { emulator, callers, realtimeUrl: String(ready.realtimeUrl) };
  try {
    const decodePerHour = opus ? opusDecodePerHour(opus) : 0;
    if (opus) console.log(`bare Opus decode (${opus.backend}) of the Discord packets: ${decodePerHour.toFixed(1)} CPU-s per speaker-hour`);
    console.log(
      `each row: ${seconds} s measured after ${WARMUP_MS / 1000} s of warm-up; CPU of the window's own process only (a fresh one per window; the emulator and the callers run in others); ${together ? 'each path measured at the same time as the same work by hand' : 'one window at a time'}`,
    );
    // The calls-on-one-core scenario first, so that `CONCURRENCY=0` measures it in the same
    // conditions as the full run. Its baseline is the same work by hand at the same load, in
    // alternating windows one at a time (both at once would be a thousand calls on the machine,
    // not the load the figure is about): the calls' figures are the mean CPU and the worst lag
    // of their windows.
    if (twilioMax > 0) {
      // One unmeasured round of both paths first, so that no measured window is the first to
      // meet the emulator's and the callers' processes at this load (cold, compiling, growing
      // their heaps while hundreds of calls connect). The rows are printed, marked, and counted
      // nowhere. (It did not steady the lag figure: see docs/performance.md.)
      if (twilioWarmupRounds > 0) {
        await measureAlternating(['twilio', 'bare-twilio'], twilioMax, twilioWarmupRounds, Math.min(seconds, 10), peers, {
          together: false,
          label: 'warm-up, not counted',
        });
      }
      const calls = await measureAlternating(['twilio', 'bare-twilio'], twilioMax, rounds, seconds, peers, { together: false });
      const s = calls.get('twilio')!;
      const byHand = calls.get('bare-twilio')!;
      record({ name: `twilio ${twilioMax} calls: calls that reached the service in time`, value: s.started, kind: 'min', bound: twilioMax, unit: '' });
      record({ name: `twilio ${twilioMax} calls: share of one core`, value: s.corePercent, kind: 'max', bound: 100, unit: ' %' });
      record({ name: `twilio ${twilioMax} calls: event-loop lag p99`, value: s.lagP99, kind: 'max', bound: undefined, unit: ' ms' });
      record({
        name: `twilio ${twilioMax} calls: event-loop lag p99 minus that of the same work by hand`,
        value: s.lagP99 - byHand.lagP99,
        kind: 'max',
        bound: 10,
        unit: ' ms',
      });
      record({
        name: `twilio ${twilioMax} calls / the same work by hand, CPU per call-hour`,
        value: s.cpuPerHour / byHand.cpuPerHour,
        kind: 'max',
        bound: 1.1,
      });
      record({ name: `twilio ${twilioMax} calls by hand (baseline): share of one core`, value: byHand.corePercent, kind: 'max', bound: undefined, unit: ' %' });
      record({ name: `twilio ${twilioMax} calls by hand (baseline): event-loop lag p99`, value: byHand.lagP99, kind: 'max', bound: undefined, unit: ' ms' });
    }
    for (const n of counts) {
      const results = await measureAlternating(paths, n, rounds, seconds, peers, { together });
      // Each path against the same work by hand. (The adapters against the plain stream compared
      // unlike work, a conversion and a codec against none, and are no longer figures.)
      const lines: string[] = [];
      for (const { name, path, baseline: baselinePath } of PAIRS) {
        const value = results.get(path);
        const baseline = results.get(baselinePath);
        if (value === undefined || baseline === undefined) continue;
        const cpu = value.cpuPerHour / baseline.cpuPerHour;
        const lag = value.lagP99 / baseline.lagP99;
        lines.push(`${name.split(' (the')[0]} ${cpu.toFixed(2)} (lag p99 ${lag.toFixed(2)})`);
        record({ name: `${name}, CPU per session-hour, ${n} sessions`, value: cpu, kind: 'max', bound: 1.15 });
        if (path === 'plain') record({ name: `${name}, event-loop lag p99, ${n} sessions`, value: lag, kind: 'max', bound: 1.2 });
      }
      console.log(`  ratios at ${n}: ${lines.join(', ')}`);
    }
  } finally {
    await Promise.all([peers.emulator.close(), peers.callers.close()]);
  }
}
