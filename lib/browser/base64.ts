/**
 * Base64 of PCM16 for the append and audio events, without Node's Buffer: the engine's own
 * `Uint8Array.prototype.toBase64` / `Uint8Array.fromBase64` where it has them, else `btoa` /
 * `atob` over the bytes. PCM16 is little-endian on the wire, as in every browser engine.
 */
interface Base64Native {
  toBase64?: (this: Uint8Array) => string;
}
interface Base64NativeStatic {
  fromBase64?: (text: string) => Uint8Array;
}

/** Bytes per `String.fromCharCode` call (its arguments go on the stack). */
const PIECE = 0x8000;

export function bytesToBase64(bytes: Uint8Array): string {
  const native = (Uint8Array.prototype as Base64Native).toBase64;
  if (native) return native.call(bytes);
  let binary = '';
  for (let at = 0; at < bytes.length; at += PIECE) binary += String.fromCharCode(...bytes.subarray(at, at + PIECE));
  return btoa(binary);
}

export function base64ToBytes(text: string): Uint8Array {
  const native = (Uint8Array as Base64NativeStatic).fromBase64;
  if (native) return native(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
