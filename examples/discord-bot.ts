/**
 * A Discord bot that translates one speaker in a voice channel and plays the translation back
 * into the channel, live.
 *
 *   speaker's Opus packets -> DiscordReceiveAdapter -> RealtimeTranslateStream
 *     -> DiscordPlaybackAdapter (Opus packets) -> AudioPlayer
 *
 * Run it (from the repository root, or an app that depends on rt-translate):
 *
 *   npm install discord.js @discordjs/voice          # not dependencies of the library
 *   npm run build
 *   DISCORD_TOKEN=...          \   # the bot's token (Developer Portal -> Bot)
 *   DISCORD_CHANNEL_ID=...     \   # the voice channel to join
 *   DISCORD_SPEAKER_ID=...     \   # optional: the user to translate (default: the first who speaks)
 *   TRANSLATE_FROM=en-us TRANSLATE_TO=es-es \
 *   DISCORD_PLAY_FILE=talk.mp3 \   # optional: a file (any format) translated and played on joining
 *   RT_TRANSLATE_API_KEY=...   \   # the translation service's key
 *   RT_TRANSLATE_REALTIME_URL=wss://realtime.camb.ai \
 *   node dist/examples/discord-bot.js
 *
 * The bot needs the "Guilds" and "Guild Voice States" intents and the Connect and Speak
 * permissions in the channel. It joins undeafened (it must hear the speaker). Stop with Ctrl+C.
 *
 * Without RT_TRANSLATE_REALTIME_URL the bot starts the embedded emulator (`rt-translate/emulator`)
 * and uses it: each utterance is then played back as it was heard, so the whole path can be
 * tried without a service account.
 *
 * One speaker is translated at a time (`SpeakerSlot`, in `speaker-slot.ts`): when that
 * translation ends or fails (the service closed the session, a network error), the slot is freed
 * and the receiver's subscription released, and the next person who speaks is translated.
 *
 * discord.js and @discordjs/voice are loaded with a dynamic import, so this file type-checks
 * and builds without them; the few of their types it uses are declared in `discord-voice.ts`.
 */
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { EMULATOR_DEFAULT_API_KEY, startEmulator } from '../lib/emulator/index.js';
import {
  DiscordPlaybackAdapter,
  RealtimeTranslateStream,
  openAudioSource,
  translateSpeaker,
  type RealtimeTranslateOptions,
  type SpeakerTranslation,
} from '../lib/index.js';
import { loadDiscord } from './discord-voice.js';
import { SpeakerSlot } from './speaker-slot.js';

/** A file's translation as Opus packets for the player, and when it is over. */
export interface FileTranslation {
  /** 20 ms Opus packets, one per chunk (object mode), for `createAudioResource(..., { inputType: StreamType.Opus })`. */
  packets: Readable;
  translator: RealtimeTranslateStream;
  /** Settles once the last translation went into `packets`; rejects with the first failure. */
  done: Promise<void>;
}

/**
 * Translates an audio file (any format `openAudioSource` reads: WAV, Ogg/Opus, FLAC, raw PCM,
 * and MP3, MP4, ... through ffmpeg) into Opus packets for a Discord audio player. The player
 * takes one packet every 20 ms; its backpressure paces the whole path.
 */
export async function translateFile(path: string, options: RealtimeTranslateOptions): Promise<FileTranslation> {
  const source = await openAudioSource(path);
  let translator: RealtimeTranslateStream;
  try {
    translator = new RealtimeTranslateStream(options);
  } catch (error) {
    source.destroy();
    throw error;
  }
  const packets = new DiscordPlaybackAdapter({ output: 'opus' });
  const done = pipeline(source, translator, packets);
  done.catch(() => {});
  return { packets, translator, done };
}

function env(name: string, fallback?: string): string {
  const value = process.env[name] ?? fallback;
  if (!value) {
    console.error(`Set ${name} (see the top of examples/discord-bot.ts).`);
    process.exit(2);
  }
  return value;
}

// --- the bot --------------------------------------------------------------------------------------

/** Runs the bot from the environment (see the comment at the top). */
async function main(): Promise<void> {
  const token = env('DISCORD_TOKEN');
  const playFile = process.env.DISCORD_PLAY_FILE;
  const channelId = env('DISCORD_CHANNEL_ID');
  const wantedSpeaker = process.env.DISCORD_SPEAKER_ID;
  const from = env('TRANSLATE_FROM', 'en-us');
  const to = env('TRANSLATE_TO', 'es-es');

  // The translation service: the configured one, or the embedded emulator.
  const service: Pick<RealtimeTranslateOptions, 'realtimeUrl' | 'apiKey'> = {};
  let emulator: Awaited<ReturnType<typeof startEmulator>> | undefined;
  if (!process.env.RT_TRANSLATE_REALTIME_URL) {
    emulator = await startEmulator();
    service.realtimeUrl = emulator.realtimeUrl;
    service.apiKey = EMULATOR_DEFAULT_API_KEY;
    console.log(`no RT_TRANSLATE_REALTIME_URL: using the embedded emulator at ${emulator.realtimeUrl}`);
  }

  const { discord, voice } = await loadDiscord();

  const client = new discord.Client({ intents: [discord.GatewayIntentBits.Guilds, discord.GatewayIntentBits.GuildVoiceStates] });
  const ready = new Promise<void>((resolve) => client.once(discord.Events.ClientReady, resolve));
  await client.login(token);
  await ready;
  console.log(`logged in as ${client.user?.tag}`);

  const channel = await client.channels.fetch(channelId);
  if (!channel || !channel.isVoiceBased()) {
    console.error(`${channelId} is not a voice channel this bot can see.`);
    await client.destroy();
    process.exit(2);
  }

  const connection = voice.joinVoiceChannel({
    channelId: channel.id,
    guildId: channel.guild.id,
    adapterCreator: channel.guild.voiceAdapterCreator,
    selfDeaf: false,
    selfMute: false,
  });
  await voice.entersState(connection, voice.VoiceConnectionStatus.Ready, 30_000);
  console.log(`joined #${channel.name}; waiting for ${wantedSpeaker ?? 'someone'} to speak`);

  // The player reads one packet every 20 ms. Between translations there is nothing to read: play
  // silence meanwhile instead of stopping after 5 missed frames.
  const player = voice.createAudioPlayer({ behaviors: { maxMissedFrames: Infinity, noSubscriber: voice.NoSubscriberBehavior.Play } });
  player.on('error', (err) => console.error(`player: ${err.message}`));
  connection.subscribe(player);

  if (playFile) {
    const file = await translateFile(playFile, { from, to, ...service });
    file.translator.on('text.done', (text) => console.log(`${playFile}: ${text}`));
    player.play(voice.createAudioResource(file.packets, { inputType: voice.StreamType.Opus }));
    file.done.then(
      () => console.log(`${playFile}: translated`),
      (err: Error) => console.error(`${playFile}: ${err.message}`),
    );
  }

  const slot = new SpeakerSlot<SpeakerTranslation>();
  let stopping = false;

  connection.receiver.speaking.on('start', (userId) => {
    if (stopping || slot.active || userId === client.user?.id) return;
    if (wantedSpeaker && userId !== wantedSpeaker) return;
    // One subscription for the whole session: the receive adapter fills the silences the receiver
    // leaves out, so the service hears the pauses and ends each utterance on time.
    let taken;
    try {
      taken = slot.take(
        userId,
        () => connection.receiver.subscribe(userId, { end: { behavior: voice.EndBehaviorType.Manual } }),
        (packets) => translateSpeaker({ opusPackets: packets, from, to, output: 'opus', ...service }),
      );
    } catch (err) {
      console.error(`cannot translate <@${userId}>: ${(err as Error).message}`);
      return;
    }
    if (taken === undefined) return;
    const { path } = taken;
    console.log(`translating <@${userId}> ${from} -> ${to} (Opus backend: ${path.receiver.opusBackend})`);

    path.translator.on('transcript.done', (text) => console.log(`heard:      ${text}`));
    path.translator.on('text.done', (text) => console.log(`translated: ${text}`));
    path.translator.on('warning', (w) => console.warn(`service warning: ${w.message}`));
    path.receiver.on('warning', (w) => console.warn(`receiver: ${w.message}`));
    player.play(voice.createAudioResource(path.playback, { inputType: voice.StreamType.Opus }));

    path.done.then(
      () => console.log('translation ended; waiting for the next speaker'),
      (err: Error) => console.error(`translation failed: ${err.message}; waiting for the next speaker`),
    );
  });

  process.on('SIGINT', () => {
    if (stopping) process.exit(1);
    stopping = true;
    console.log('stopping: finishing the last translation (Ctrl+C again to quit at once)');
    // Ending the packets lets the translator finish the utterance in progress; then leave.
    const active = slot.active?.entry;
    active?.packets.push(null);
    const finished = active ? active.path.done.catch(() => undefined) : Promise.resolve();
    void finished.then(async () => {
      player.stop(true);
      connection.destroy();
      await client.destroy();
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
