/**
 * The service's log destination (src/http/fast-path/log-destination.ts): lines arrive
 * whole, in order, byte for byte, when the buffer fills, on flush, and when
 * the reader of a pipe is slower than the writer.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { LogDestination } from '../src/http/fast-path/log-destination.js';

describe('log destination', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-logdest-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  const fileDestination = (bytes?: number) => {
    const file = path.join(dir, `${Math.random().toString(36).slice(2)}.log`);
    const fd = fs.openSync(file, 'w');
    return { destination: new LogDestination(fd, bytes), read: () => fs.readFileSync(file, 'utf8'), close: () => fs.closeSync(fd) };
  };

  it('holds lines until flush, then writes them in order, multi-byte characters intact', () => {
    const { destination, read, close } = fileDestination(1024);
    const lines = ['{"msg":"plain"}\n', '{"msg":"zoë, Ørsted, 東京, 🩺"}\n', '{"msg":"last"}\n'];
    for (const line of lines) destination.write(line);
    assert.equal(read(), '', 'nothing written before the buffer fills or a flush');
    destination.flush();
    assert.equal(read(), lines.join(''));
    destination.flush();
    assert.equal(read(), lines.join(''), 'a second flush writes nothing again');
    close();
  });

  it('writes the buffer out when the next line would not fit, and lines larger than the buffer whole', () => {
    const { destination, read, close } = fileDestination(256);
    const expected: string[] = [];
    for (let i = 0; i < 200; i++) {
      // Lines of varying length, mostly of 2-byte characters, with a 4-byte one where buffer boundaries fall.
      const line = `{"n":${i},"pad":"${'é'.repeat(i % 60)}🫀"}\n`;
      expected.push(line);
      destination.write(line);
    }
    const big = `{"big":"${'é'.repeat(5000)}"}\n`;
    expected.push(big);
    destination.write(big);
    destination.write('{"after":"big"}\n');
    expected.push('{"after":"big"}\n');
    assert.ok(read().length > 0, 'full buffers were written without a flush');
    destination.flush();
    assert.equal(read(), expected.join(''));
    close();
  });


  it('writes a line given in three parts whole, in one flush, and one bigger than the buffer whole too', () => {
    const { destination, read, close } = fileDestination(512);
    destination.write('{"n":0}\n');
    const ids = JSON.stringify(Array.from({ length: 4 }, (_, i) => `${i}-é-id`));
    destination.writeLine('{"n":1,"ids":', ids, '}\n');
    assert.equal(read(), '', 'held like a line written whole');
    // Fills the buffer so that the next three-part line does not fit: the buffer is written out before it, never half of it.
    destination.write(`{"pad":"${'x'.repeat(300)}"}\n`);
    destination.writeLine('{"n":2,"ids":', ids, '}\n');
    const written = read();
    assert.ok(written.endsWith('}\n') && !written.includes('"n":2'), 'the line that did not fit waits for the next flush, whole');
    const huge = JSON.stringify(Array.from({ length: 100 }, (_, i) => `user-${i}-🩺`));
    destination.writeLine('{"n":3,"ids":', huge, '}\n');
    destination.flush();
    const lines = read().trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.n ?? 'pad'), [0, 1, 'pad', 2, 3]);
    assert.deepEqual(lines[4].ids, JSON.parse(huge));
    assert.deepEqual(lines[3].ids, JSON.parse(ids));
    close();
  });
  it("serves as pino's destination: pino's lines and hand-written ones share one order", () => {
    const { destination, read, close } = fileDestination();
    const logger = pino({ base: null, timestamp: false }, destination);
    logger.info('first');
    destination.write('{"level":30,"msg":"second"}\n');
    logger.warn({ n: 3 }, 'third');
    destination.flushSync();
    assert.deepEqual(read().trim().split('\n').map((l) => JSON.parse(l).msg), ['first', 'second', 'third']);
    close();
  });

  it('waits out a full pipe (EAGAIN) instead of dropping or queueing lines', async () => {
    // The child starts reading only after a pause, so the kernel's buffer of the pipe fills and
    // the synchronous writes below meet EAGAIN (our end is non-blocking).
    const reader = spawn(process.execPath, ['-e', `
      setTimeout(() => {
        const crypto = require('node:crypto');
        const hash = crypto.createHash('sha256');
        let bytes = 0;
        process.stdin.on('data', (d) => { bytes += d.length; hash.update(d); });
        process.stdin.on('end', () => process.stdout.write(bytes + ' ' + hash.digest('hex')));
      }, 300);`], { stdio: ['pipe', 'pipe', 'inherit'] });
    const fd = (reader.stdin as unknown as { _handle: { fd: number } })._handle.fd;
    assert.ok(fd > 2, 'the pipe has a file descriptor of its own');
    const destination = new LogDestination(fd, 4096);
    const hash = createHash('sha256');
    let bytes = 0;
    for (let i = 0; i < 5000; i++) {
      const line = `{"n":${i},"msg":"${'y'.repeat(100 + (i % 50))}"}\n`;
      destination.write(line);
      hash.update(line);
      bytes += Buffer.byteLength(line);
    }
    destination.flush();
    let out = '';
    reader.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise((resolve) => reader.once('exit', resolve));
    reader.stdin.end();
    await exited;
    assert.ok(bytes > 256 * 1024, 'more than a pipe holds');
    assert.equal(out, `${bytes} ${hash.digest('hex')}`, 'every byte arrived, in order');
  });
});
