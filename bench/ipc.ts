/**
 * What the benches that run in several processes drive each other with: requests and answers
 * over a fork's IPC channel (`IpcLink`, either end), and a child process with its link (`Peer`).
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';

/** One end of a fork's IPC channel: the child process as the parent holds it, or `process` in the child. */
type IpcEnd = EventEmitter & {
  readonly connected?: boolean;
  send?(message: object, sendHandle: undefined, options: undefined, callback: (error: Error | null) => void): boolean;
};

/**
 * Requests and answers over one end of a fork's IPC channel. `gone` is the event after which no
 * answer can come (`exit` of a child, `disconnect` of the parent); `other` names the other end
 * in errors.
 */
export class IpcLink {
  constructor(
    readonly end: IpcEnd,
    readonly gone: 'exit' | 'disconnect',
    readonly other: string,
  ) {}

  /**
   * Sends `message` if the channel is still open. A failed send is not reported here: the other
   * end going away (`gone`) is, to whatever waits on it.
   */
  send(message: object): void {
    if (this.end.connected === false) return;
    this.end.send?.(message, undefined, undefined, () => {});
  }

  /**
   * The next message of `type` (and, given `id`, of that `id`); rejects on the other end's error
   * report, or if it goes first.
   */
  next(type: string, id?: number): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const done = () => {
        this.end.off('message', onMessage);
        this.end.off(this.gone, onGone);
      };
      const onMessage = (message: Record<string, unknown>) => {
        // An error report with another request's id is that request's; one without an id is everyone's.
        const ours = id === undefined || message.id === undefined || message.id === id;
        if (!ours || (message.type !== 'error' && message.type !== type)) return;
        done();
        if (message.type === 'error') reject(new Error(String(message.message)));
        else resolve(message);
      };
      const onGone = (code?: unknown) => {
        done();
        reject(new Error(`${this.other} went away (${this.gone}${code === undefined ? '' : `, code ${String(code)}`}) before answering "${type}".`));
      };
      if (this.end.connected === false) return reject(new Error(`${this.other} is gone; it cannot answer "${type}".`));
      this.end.on('message', onMessage);
      this.end.on(this.gone, onGone);
    });
  }

  /** Sends `message` and waits for the answer of type `answer` (and, given `id`, of that `id`). */
  request(message: object, answer: string, id?: number): Promise<Record<string, number>> {
    const reply = this.next(answer, id);
    this.send(message);
    return reply as Promise<Record<string, number>>;
  }
}

/** A bench's child process (`module`, beside this file), driven over its IPC channel. */
export class Peer {
  readonly child: ChildProcess;
  readonly link: IpcLink;
  constructor(module: string) {
    this.child = fork(fileURLToPath(new URL(module, import.meta.url)), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.link = new IpcLink(this.child, 'exit', `The bench's process ${module}`);
    // A failure to start shows as the process's exit, to whatever waits on its link.
    this.child.on('error', () => {});
  }
  /** Asks the process to exit (kills it if it cannot be asked, or has not gone within 10 s). */
  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    if (this.child.connected) this.link.send({ type: 'exit' });
    else this.child.kill();
    const stuck = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(stuck);
  }
}
