import dns, { type LookupAllOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { dnsAddresses, isInternalAddress, isLoopbackName } from '../management/url-check.js';

/** What an attempt gave: the answer's status, or none (and why: a code, never a URL, a header or a secret). */
export type AttemptResult = { status: number; error?: undefined } | { status: null; error: string };

export interface SendOptions {
  timeoutMs: number;
  /** WEBHOOK_ALLOW_PRIVATE: `http://` and internal addresses are allowed. */
  allowPrivate: boolean;
}

const refused = (what: string) => Object.assign(new Error(`refused: ${what}`), { code: 'EINTERNALADDRESS' });

/**
 * The connection's lookup unless private addresses are allowed: a name that
 * resolves to a loopback, private, link-local or otherwise internal address
 * is refused (the rule of endpoint URLs, contract section 10). The address
 * checked is the address connected to: a name cannot resolve to a public
 * address for a check and to an internal one for the connection.
 *
 * Asked of DNS as registration asks (dnsAddresses: c-ares, no hosts file),
 * so that an endpoint whose name server hangs holds none of libuv's threads,
 * which every other endpoint's connections and the process's other work
 * share.
 */
export const publicOnlyLookup = ((hostname: string, options: LookupAllOptions & { all?: boolean }, callback: (...args: unknown[]) => void) => {
  if (isLoopbackName(hostname)) return void process.nextTick(callback, refused(`${hostname} is the loopback`));
  const families: (4 | 6)[] = options.family === 4 ? [4] : options.family === 6 ? [6] : [4, 6];
  dnsAddresses(hostname, families).then((addresses) => {
    if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: dns.NOTFOUND }));
    const internal = addresses.find((a) => isInternalAddress(a.address));
    if (internal) return callback(refused(`${hostname} resolves to an internal address`));
    if (options.all) return callback(null, addresses);
    return callback(null, addresses[0]!.address, addresses[0]!.family);
  }, (err: unknown) => callback(err));
}) as unknown as LookupFunction;

/**
 * Posts webhook deliveries over kept-alive connections. An attempt is a
 * success on a 2xx within the timeout; any other answer (a redirect too:
 * none is followed) or none at all is a failure. Unless private addresses
 * are allowed, the URL must be `https://` and every connection's address
 * public: checked at each delivery, on the connection it goes over.
 */
export class Sender {
  private readonly agents: { 'http:': http.Agent; 'https:': https.Agent };

  constructor(private readonly options: SendOptions) {
    // No cap per origin: every lane shares this sender, and a cap per host and port let a hanging endpoint's
    // attempts take every socket from another endpoint on the same host (another path, another team on one
    // receiver), whose attempts then waited in the agent while their timeouts ran. Each lane caps its own.
    const agentOptions = { keepAlive: true, maxSockets: Infinity, timeout: options.timeoutMs };
    this.agents = { 'http:': new http.Agent(agentOptions), 'https:': new https.Agent(agentOptions) };
  }

  /** One POST of `body` with `headers` to `url`; never throws. */
  send(url: string, headers: Record<string, string>, body: string): Promise<AttemptResult> {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return Promise.resolve({ status: null, error: 'EINVALIDURL' });
    }
    const protocol = target.protocol;
    if (protocol !== 'https:' && !(protocol === 'http:' && this.options.allowPrivate)) return Promise.resolve({ status: null, error: 'EINSECUREURL' });
    const host = target.hostname.replace(/^\[|\]$/g, '');
    if (!this.options.allowPrivate && isIP(host) !== 0 && isInternalAddress(host)) return Promise.resolve({ status: null, error: 'EINTERNALADDRESS' });
    const client = protocol === 'https:' ? https : http;
    return new Promise((resolve) => {
      let settled = false;
      let request: http.ClientRequest | undefined;
      const timer = setTimeout(() => {
        settle({ status: null, error: 'ETIMEDOUT' });
        request?.destroy();
      }, this.options.timeoutMs);
      function settle(result: AttemptResult) {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      }
      try {
        request = client.request(target, {
          method: 'POST',
          agent: this.agents[protocol],
          headers: { ...headers, 'content-length': Buffer.byteLength(body) },
          ...(this.options.allowPrivate ? {} : { lookup: publicOnlyLookup }),
        }, (response) => {
          // The body is read and dropped, so that the connection can carry the next delivery.
          response.resume();
          response.on('end', () => settle({ status: response.statusCode ?? 0 }));
          response.on('error', () => settle({ status: null, error: 'ERESPONSE' }));
        });
      } catch (err) {
        // A header value Node refuses (a custom header): the error names the header, never its value.
        settle({ status: null, error: (err as NodeJS.ErrnoException).code ?? 'EREQUEST' });
        return;
      }
      request.on('error', (err: NodeJS.ErrnoException) => settle({ status: null, error: err.code ?? 'EREQUEST' }));
      request.end(body);
    });
  }

  /** Closes every kept connection, and those in use (their attempts fail). */
  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }
}
