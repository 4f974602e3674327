/**
 * What the realtime translation command prints at its end: `--stats`, a few lines a person reads
 * from a session's figures (one session, or each target of a fan-out, its lines prefixed with
 * its language), and the line of an input that failed midway.
 */
import { RtTranslateError, type AudioInputError, type RealtimeStats, type LatencySummary } from '../lib/index.js';
import { REALTIME_SAMPLE_RATE } from '../lib/protocol.js';

/** Seconds of service-format audio in `bytes`, one decimal. */
export function seconds(bytes: number): string {
  return (bytes / (REALTIME_SAMPLE_RATE * 2)).toFixed(1);
}

function latencyText(summary: LatencySummary): string {
  if (summary.count === 0) return 'n/a';
  const s = (v: number | undefined) => ((v ?? 0) / 1000).toFixed(2);
  return `p50 ${s(summary.p50)} s, p95 ${s(summary.p95)} s, max ${s(summary.max)} s`;
}

/** `--stats`: a few lines a person reads at the end of a session. */
export function statsLines(stats: RealtimeStats): string[] {
  const lines = [
    `${stats.responses} ${stats.responses === 1 ? 'response' : 'responses'}; ` +
      `${seconds(stats.inputBytes)} s of audio in, ${seconds(stats.bytesReceived)} s of translated audio out`,
    `latency from the end of a sentence: transcript ${latencyText(stats.latency.transcriptMs)}; ` +
      `first translated text ${latencyText(stats.latency.firstTextMs)}; ` +
      `first translated audio ${latencyText(stats.latency.firstAudioMs)}; ` +
      `whole answer ${latencyText(stats.latency.doneMs)}`,
  ];
  if (stats.reconnects > 0) {
    lines.push(
      `${stats.reconnects} ${stats.reconnects === 1 ? 'reconnect' : 'reconnects'}, ${(stats.outageMs / 1000).toFixed(1)} s without a session ` +
        `(longest ${(stats.longestOutageMs / 1000).toFixed(1)} s), ${seconds(stats.bytesReplayed)} s of audio sent again`,
    );
  }
  if (stats.ending && !stats.ending.complete) {
    lines.push(`ended incomplete (${stats.ending.reason}): ${(stats.ending.unansweredSpeechMs / 1000).toFixed(1)} s of speech unanswered`);
  }
  return lines;
}

/** An input that failed midway: what failed, and how much audio came before it (`translated`: and was answered). */
export function inputFailureLine(inputFailure: AudioInputError, sentBytes: number, translated: boolean): string {
  const cause = inputFailure.cause;
  const code = cause instanceof RtTranslateError ? ` [${cause.code}]` : '';
  const used = `${seconds(sentBytes)} s of audio before the failure ${translated ? 'were translated' : 'were sent'}`;
  return `rt-translate: input error: ${inputFailure.message.replace(/\.$/, '')}${code}; ${used}.\n`;
}
