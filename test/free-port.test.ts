/**
 * freePort() picks below the kernel's ephemeral range, where an outgoing
 * connection cannot take the port between the pick and the listen.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { ephemeralRangeStart, freePort, LOWEST_PICKED_PORT } from '../src/db/free-port.js';

describe('freePort', () => {
  it('picks ports below the ephemeral range that can be listened on', async () => {
    const start = ephemeralRangeStart();
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      if (start !== undefined) {
        assert.ok(port >= LOWEST_PICKED_PORT && port < start, `port ${port} outside [${LOWEST_PICKED_PORT}, ${start})`);
      }
      const server = net.createServer();
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('knows the range on Linux', { skip: process.platform !== 'linux' }, () => {
    assert.ok(ephemeralRangeStart() !== undefined, 'no ephemeral range read from /proc on Linux');
  });
});
