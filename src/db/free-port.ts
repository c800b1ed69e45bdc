import fs from 'node:fs';
import net from 'node:net';

/** The lowest port freePort() picks when it knows the kernel's ephemeral range. */
export const LOWEST_PICKED_PORT = 10000;

/** The first port of the kernel's ephemeral range (Linux), or undefined when unknown or too low to pick below. */
export function ephemeralRangeStart(): number | undefined {
  try {
    const start = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(start) && start > LOWEST_PICKED_PORT + 1000 ? start : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago. Picked below the
 * kernel's ephemeral range where that is known: a port inside it can be taken,
 * before its listener binds, as the local port of an outgoing connection (a
 * service's own to its database), and the listen then fails with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  const start = ephemeralRangeStart();
  if (start === undefined) return listenOnce(0);
  for (let attempt = 1; ; attempt++) {
    const port = LOWEST_PICKED_PORT + Math.floor(Math.random() * (start - LOWEST_PICKED_PORT));
    try {
      return await listenOnce(port);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 100) throw err;
    }
  }
}

/** Listens on `port` (0: the OS picks) and closes again; the port listened on. */
function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as net.AddressInfo;
      server.close(() => resolve(bound));
    });
  });
}
