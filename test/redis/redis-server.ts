/**
 * A real `redis-server` for the queue tests: started on a free loopback port with nothing saved
 * to disk, ready once it says so on its output, stopped (and waited for) by `close()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';

export interface RedisServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

/** Starts redis-server; tries another port when the one found free was taken meanwhile. */
export async function startRedis(): Promise<RedisServer> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const ready = await started(child);
    if (ready === 'ready') {
      return {
        url: `redis://127.0.0.1:${port}`,
        port,
        close: async () => {
          if (child.exitCode === null && child.signalCode === null) {
            child.kill('SIGKILL');
            await once(child, 'exit');
          }
        },
      };
    }
    if (ready !== 'in use' || attempt >= 5) throw new Error(`redis-server did not start: ${ready}`);
  }
}

/** Resolves 'ready' once the server accepts connections, 'in use' when the port was taken, else its output. */
function started(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    let output = '';
    const onData = (text: string): void => {
      output += text;
      if (output.includes('Ready to accept connections')) finish('ready');
      else if (/Address already in use/.test(output)) finish('in use');
    };
    const finish = (result: string): void => {
      child.stdout!.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
      resolve(result);
    };
    const onExit = (): void => finish(output || 'it exited');
    const onError = (error: Error): void => finish(error.message);
    child.stdout!.setEncoding('utf8').on('data', onData);
    child.stderr!.setEncoding('utf8').on('data', onData);
    child.on('exit', onExit);
    child.on('error', onError);
  });
}
