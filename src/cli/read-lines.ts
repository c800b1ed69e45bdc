import type { Readable } from 'node:stream';

/**
 * Lines of a stream, read only as fast as they are consumed. Unlike
 * readline's iterator, nothing flows before the first `next()`: readline
 * starts emitting at once, and lines emitted before the consumer begins
 * iterating are silently lost (the import awaits its transaction first).
 */
export async function* readLines(input: Readable): AsyncGenerator<string> {
  input.setEncoding('utf8');
  let rest = '';
  for await (const chunk of input as AsyncIterable<string>) {
    const parts = (rest + chunk).split('\n');
    rest = parts.pop()!;
    for (const line of parts) yield line.endsWith('\r') ? line.slice(0, -1) : line;
  }
  if (rest !== '') yield rest.endsWith('\r') ? rest.slice(0, -1) : rest;
}
