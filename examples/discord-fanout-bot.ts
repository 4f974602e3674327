/**
 * A Discord bot that translates one speaker in a voice channel into several languages at once,
 * each language played by its own bot in its own voice channel (an "interpretation channel" per
 * language), through one `RealtimeFanout`: the speaker's audio is decoded once and sent to one
 * session per language.
 *
 *   speaker's Opus packets -> DiscordReceiveAdapter -> RealtimeFanout (one session per language)
 *     -> target(lang).output -> DiscordPlaybackAdapter (Opus packets) -> that language's player
 *
 * Run it (from the repository root, or an app that depends on rt-translate):
 *
 *   npm install discord.js @discordjs/voice          # not dependencies of the library
 *   npm run build
 *   DISCORD_TOKEN=...            \   # the bot that listens (Developer Portal -> Bot)
 *   DISCORD_CHANNEL_ID=...       \   # the speaker's voice channel
 *   DISCORD_SPEAKER_ID=...       \   # optional: the user to translate (default: the first who speaks)
 *   TRANSLATE_FROM=en-us TRANSLATE_TO=es-es,fr-fr \
 *   DISCORD_TOKEN_ES_ES=... DISCORD_CHANNEL_ES_ES=... \   # per language: a bot and its channel
 *   DISCORD_TOKEN_FR_FR=... DISCORD_CHANNEL_FR_FR=... \
 *   RT_TRANSLATE_API_KEY=... RT_TRANSLATE_REALTIME_URL=wss://realtime.camb.ai \
 *   node dist/examples/discord-fanout-bot.js
 *
 * A Discord bot is in one voice channel per server at a time, so each language needs a bot of
 * its own (invite them all, with Connect and Speak). A language without a bot and channel is
 * written to `translation-<lang>.pcm` (PCM16 mono 24 kHz) instead. Without
 * RT_TRANSLATE_REALTIME_URL the embedded emulator stands in for the service. Stop with Ctrl+C:
 * each language finishes what the speaker said, then the bots leave.
 *
 * A language that fails (a voice the service refuses, say) ends alone, its error logged; the
 * others go on. A language whose channel is slow to play holds only its own session back.
 */
import { createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { EMULATOR_DEFAULT_API_KEY, startEmulator } from '../lib/emulator/index.js';
import {
  DiscordPlaybackAdapter,
  DiscordReceiveAdapter,
  RealtimeFanout,
  type FanoutTargetSpec,
  type OpusBackendChoice,
  type OpusPacketInput,
  type PlaybackOutput,
  type RealtimeFanoutOptions,
  type RealtimeLanguage,
} from '../lib/index.js';
import {
  loadDiscord,
  type AudioPlayer,
  type DiscordClient,
  type DiscordJs,
  type DiscordVoice,
  type VoiceChannelLike,
  type VoiceConnection,
} from './discord-voice.js';
import { SpeakerSlot } from './speaker-slot.js';

export interface SpeakerIntoOptions extends Omit<RealtimeFanoutOptions, 'to'> {
  /** The speaker's Opus packets: a receiver's `AudioReceiveStream`, or any (async) iterable of packets. */
  opusPackets: Readable | AsyncIterable<OpusPacketInput> | Iterable<OpusPacketInput>;
  /** The languages (tags, or `{ lang, voiceId }`). */
  to: readonly FanoutTargetSpec[];
  /** Each language's playback: Opus packets (default, for `StreamType.Opus`) or 48 kHz stereo PCM frames. */
  output?: PlaybackOutput;
  opusBackend?: OpusBackendChoice;
  /** Languages without playback: the caller reads their PCM16 24 kHz from `fanout.target(lang).output`. */
  unplayed?: readonly string[];
}

export interface SpeakerInto {
  fanout: RealtimeFanout;
  receiver: DiscordReceiveAdapter;
  /** Each language's 20 ms frames to play (object mode), by language tag. */
  playback: Map<RealtimeLanguage, Readable>;
  /**
   * Settles once the packets have ended and every language has played out: resolves when the
   * input went through (a language that failed alone is in `fanout.stats`), rejects when the
   * input path itself failed. Already handled.
   */
  done: Promise<void>;
}

/**
 * One speaker's translation into several languages: the packets decoded once into the fan-out,
 * each language's audio into a playback adapter of its own. Throws for bad options before
 * anything connects.
 */
export function translateSpeakerInto(options: SpeakerIntoOptions): SpeakerInto {
  const { opusPackets, output = 'opus', opusBackend = 'auto', unplayed = [], ...fanoutOptions } = options;
  const source = opusPackets instanceof Readable ? opusPackets : Readable.from(opusPackets as Iterable<OpusPacketInput>);
  const receiver = new DiscordReceiveAdapter({ opusBackend, chunkMs: 100 });
  let fanout: RealtimeFanout;
  try {
    fanout = new RealtimeFanout(fanoutOptions);
  } catch (error) {
    receiver.destroy();
    throw error;
  }
  const playback = new Map<RealtimeLanguage, Readable>();
  const played: Array<Promise<void>> = [];
  for (const target of fanout.targets) {
    if (unplayed.some((tag) => tag.toLowerCase() === target.lang)) continue;
    const adapter = new DiscordPlaybackAdapter({ output, opusBackend });
    playback.set(target.lang, adapter);
    // A language's playback that fails stops that language only (its output destroyed).
    const one = pipeline(target.output, adapter);
    played.push(one.catch(() => undefined));
  }
  const input = pipeline(source, receiver, fanout);
  const done = Promise.all([input, ...played]).then(() => undefined);
  done.catch(() => {});
  return { fanout, receiver, playback, done };
}

function env(name: string, fallback?: string): string {
  const value = process.env[name] ?? fallback;
  if (!value) {
    console.error(`Set ${name} (see the top of examples/discord-fanout-bot.ts).`);
    process.exit(2);
  }
  return value;
}

/** A bot logged in, in a voice channel: its connection and its client. */
async function joinAs(
  discord: DiscordJs,
  voice: DiscordVoice,
  token: string,
  channelId: string,
  group: string,
): Promise<{ client: DiscordClient; connection: VoiceConnection; channel: VoiceChannelLike }> {
  const client = new discord.Client({ intents: [discord.GatewayIntentBits.Guilds, discord.GatewayIntentBits.GuildVoiceStates] });
  const ready = new Promise<void>((resolve) => client.once(discord.Events.ClientReady, resolve));
  await client.login(token);
  await ready;
  const channel = await client.channels.fetch(channelId);
  if (!channel || !channel.isVoiceBased()) throw new Error(`${channelId} is not a voice channel ${client.user?.tag} can see.`);
  // `group`: each bot's connections apart (@discordjs/voice keys them by guild within a group).
  const connection = voice.joinVoiceChannel({
    channelId: channel.id,
    guildId: channel.guild.id,
    adapterCreator: channel.guild.voiceAdapterCreator,
    selfDeaf: false,
    selfMute: false,
    group,
  });
  await voice.entersState(connection, voice.VoiceConnectionStatus.Ready, 30_000);
  return { client, connection, channel };
}

async function main(): Promise<void> {
  const from = env('TRANSLATE_FROM', 'en-us');
  const languages = env('TRANSLATE_TO', 'es-es,fr-fr')
    .split(',')
    .map((tag) => tag.trim().toLowerCase());
  const wantedSpeaker = process.env.DISCORD_SPEAKER_ID;
  const service: { realtimeUrl?: string; apiKey?: string } = {};
  let emulator: Awaited<ReturnType<typeof startEmulator>> | undefined;
  if (!process.env.RT_TRANSLATE_REALTIME_URL) {
    emulator = await startEmulator();
    service.realtimeUrl = emulator.realtimeUrl;
    service.apiKey = EMULATOR_DEFAULT_API_KEY;
    console.log(`no RT_TRANSLATE_REALTIME_URL: using the embedded emulator at ${emulator.realtimeUrl}`);
  }
  const { discord, voice } = await loadDiscord();

  const listener = await joinAs(discord, voice, env('DISCORD_TOKEN'), env('DISCORD_CHANNEL_ID'), 'listener');
  console.log(`${listener.client.user?.tag} in #${listener.channel.name}; waiting for ${wantedSpeaker ?? 'someone'} to speak`);
  // Each language: its own bot in its own channel, or a file.
  const players = new Map<string, { player: AudioPlayer; bot: Awaited<ReturnType<typeof joinAs>> }>();
  for (const lang of languages) {
    const key = lang.toUpperCase().replace('-', '_');
    const token = process.env[`DISCORD_TOKEN_${key}`];
    const channelId = process.env[`DISCORD_CHANNEL_${key}`];
    if (!token || !channelId) {
      console.log(`${lang}: no DISCORD_TOKEN_${key} and DISCORD_CHANNEL_${key}; writing translation-${lang}.pcm`);
      continue;
    }
    const bot = await joinAs(discord, voice, token, channelId, `lang-${lang}`);
    const player = voice.createAudioPlayer({ behaviors: { maxMissedFrames: Infinity, noSubscriber: voice.NoSubscriberBehavior.Play } });
    player.on('error', (err) => console.error(`${lang} player: ${err.message}`));
    bot.connection.subscribe(player);
    players.set(lang, { player, bot });
    console.log(`${lang}: ${bot.client.user?.tag} plays in #${bot.channel.name}`);
  }

  const slot = new SpeakerSlot<SpeakerInto>();
  const unplayed = languages.filter((lang) => !players.has(lang));
  let stopping = false;
  listener.connection.receiver.speaking.on('start', (userId) => {
    if (stopping || slot.active || userId === listener.client.user?.id) return;
    if (wantedSpeaker && userId !== wantedSpeaker) return;
    let taken;
    try {
      taken = slot.take(
        userId,
        () => listener.connection.receiver.subscribe(userId, { end: { behavior: voice.EndBehaviorType.Manual } }),
        (packets) => translateSpeakerInto({ opusPackets: packets, from, to: languages, output: 'opus', unplayed, ...service }),
      );
    } catch (err) {
      console.error(`cannot translate <@${userId}>: ${(err as Error).message}`);
      return;
    }
    if (taken === undefined) return;
    const { path } = taken;
    console.log(`translating <@${userId}> ${from} -> ${languages.join(', ')}`);
    path.fanout.on('event', (event) => {
      if (event.type === 'text.done') console.log(`${event.lang}: ${event.text ?? ''}`);
    });
    path.fanout.on('target.done', (info) => console.log(`${info.lang}: ${info.outcome}${info.error ? ` (${info.error.message})` : ''}`));
    for (const [lang, frames] of path.playback) players.get(lang)!.player.play(voice.createAudioResource(frames, { inputType: voice.StreamType.Opus }));
    for (const lang of unplayed) {
      // No bot for this language: its PCM goes to a file.
      void pipeline(path.fanout.target(lang)!.output, createWriteStream(`translation-${lang}.pcm`)).catch(() => undefined);
    }
  });

  process.on('SIGINT', () => {
    if (stopping) process.exit(1);
    stopping = true;
    console.log('stopping: each language finishes what was said (Ctrl+C again to quit at once)');
    const active = slot.active?.entry;
    active?.packets.push(null);
    const finished = active ? active.path.done.catch(() => undefined) : Promise.resolve();
    void finished.then(async () => {
      for (const { player, bot } of players.values()) {
        player.stop(true);
        bot.connection.destroy();
        await bot.client.destroy();
      }
      listener.connection.destroy();
      await listener.client.destroy();
      await emulator?.close();
    });
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: Error) => {
    console.error(error.message);
    process.exitCode = 1;
  });
}
