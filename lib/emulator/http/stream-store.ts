/** The emulator's live stream dubbing records (`routes-streams.ts` answers them), by id. */

export interface EmulatedStream {
  owner: string;
  record: Record<string, unknown>;
}

/** The emulator's live streams, by id. */
export class StreamStore {
  readonly streams = new Map<number, EmulatedStream>();
  #nextId = 801;
  next(): number {
    return this.#nextId++;
  }
}
