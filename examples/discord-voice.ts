/**
 * The parts of discord.js and @discordjs/voice that the Discord examples (`discord-bot.ts`,
 * `discord-fanout-bot.ts`) use, and `loadDiscord()`, which imports both packages when a bot
 * starts.
 *
 * Neither package is a dependency of rt-translate: install them in the application that runs a
 * bot (`npm install discord.js @discordjs/voice`). They are imported dynamically, so the
 * examples type-check and build without them; the few of their types the examples touch are
 * declared here, as a small structural subset. In an application that depends on both packages,
 * import them directly and use their own types instead.
 */
import type { Readable } from 'node:stream';

export interface VoiceChannelLike {
  id: string;
  name: string;
  guild: { id: string; voiceAdapterCreator: unknown };
  isVoiceBased(): boolean;
}
export interface DiscordClient {
  once(event: string, listener: () => void): unknown;
  login(token: string): Promise<string>;
  destroy(): Promise<void> | void;
  user: { tag: string; id: string } | null;
  channels: { fetch(id: string): Promise<VoiceChannelLike | null> };
}
export interface DiscordJs {
  Client: new (options: { intents: number[] }) => DiscordClient;
  GatewayIntentBits: { Guilds: number; GuildVoiceStates: number };
  Events: { ClientReady: string };
}
export interface VoiceConnection {
  receiver: {
    speaking: { on(event: 'start', listener: (userId: string) => void): unknown };
    subscribe(userId: string, options: { end: { behavior: number } }): Readable;
  };
  subscribe(player: AudioPlayer): unknown;
  destroy(): void;
}
export interface AudioPlayer {
  play(resource: unknown): void;
  stop(force?: boolean): boolean;
  on(event: 'error', listener: (error: Error) => void): unknown;
}
export interface DiscordVoice {
  joinVoiceChannel(options: {
    channelId: string;
    guildId: string;
    adapterCreator: unknown;
    selfDeaf: boolean;
    selfMute: boolean;
    group?: string;
  }): VoiceConnection;
  entersState(target: VoiceConnection, status: string, timeoutMs: number): Promise<unknown>;
  VoiceConnectionStatus: { Ready: string };
  EndBehaviorType: { Manual: number };
  createAudioPlayer(options: { behaviors: { maxMissedFrames: number; noSubscriber: string } }): AudioPlayer;
  NoSubscriberBehavior: { Play: string };
  createAudioResource(input: Readable, options: { inputType: string }): unknown;
  StreamType: { Opus: string };
}

async function load<T>(name: string): Promise<T> {
  try {
    // A CommonJS package's exports may sit on `default` only; merge both views.
    const ns = (await import(name)) as Record<string, unknown>;
    const cjs = typeof ns.default === 'object' && ns.default !== null ? (ns.default as Record<string, unknown>) : {};
    return { ...cjs, ...ns } as T;
  } catch (err) {
    console.error(`This example needs the package "${name}": npm install discord.js @discordjs/voice (${(err as Error).message})`);
    process.exit(2);
  }
}

/** discord.js and @discordjs/voice, imported now; the process exits (code 2) saying what to install when one is missing. */
export async function loadDiscord(): Promise<{ discord: DiscordJs; voice: DiscordVoice }> {
  const discord = await load<DiscordJs>('discord.js');
  const voice = await load<DiscordVoice>('@discordjs/voice');
  return { discord, voice };
}
