/**
 * A timer for a verdict drawn from silence: the service has been quiet long enough, has not
 * answered, has not finished its handshake. Node runs expired timers before it polls sockets, so
 * a process that was busy past the deadline (a long garbage collection, a CPU-bound neighbour, a
 * descheduled container) would judge the service by the stall of its own event loop, with the
 * answer already waiting unread in the socket.
 *
 * So the timer only schedules the verdict, two turns of the event loop later (`setImmediate`
 * runs after the loop's poll for I/O): the first turn lets everything else that was due run,
 * other timers and the work they defer (a server in the same process answering, say); the second
 * reads what they and the network delivered. The verdict is given only if the timer is still the
 * current one then (`current`): nothing read meanwhile replaced or cleared it.
 */
export function verdictTimer(delayMs: number, current: (timer: NodeJS.Timeout) => boolean, verdict: () => void): NodeJS.Timeout {
  const timer: NodeJS.Timeout = setTimeout(() => {
    setImmediate(() => {
      setImmediate(() => {
        if (current(timer)) verdict();
      });
    });
  }, delayMs);
  return timer;
}
