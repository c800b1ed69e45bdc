import dns, { type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/** The addresses a host name resolves to. */
export type Lookup = (hostname: string) => Promise<string[]>;

/**
 * The name's addresses of these families from DNS; none of a family it has
 * none of (a missing one does not fail the other). Asked through c-ares
 * (dns.resolve4/6), not the system's resolver (dns.lookup), whose
 * getaddrinfo holds one of the four threads of libuv's pool for as long as a
 * name server takes; and not the hosts file: an endpoint is a public name.
 * Registration and every delivery (src/events/send.ts) ask the same way, so a
 * name accepted at one is the name the other connects to.
 */
export async function dnsAddresses(hostname: string, families: readonly (4 | 6)[] = [4, 6]): Promise<LookupAddress[]> {
  const found = await Promise.all(families.map(async (family) => {
    try {
      const addresses = family === 4 ? await dns.promises.resolve4(hostname) : await dns.promises.resolve6(hostname);
      return addresses.map((address) => ({ address, family }));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === dns.NODATA || (err as NodeJS.ErrnoException).code === dns.NOTFOUND) return [];
      throw err;
    }
  }));
  return found.flat();
}

/** RFC 6761: `localhost` and the names under it (any case, a trailing dot or not) are the loopback, whatever a DNS server says. */
export function isLoopbackName(hostname: string): boolean {
  return /(^|\.)localhost\.?$/i.test(hostname);
}

/** The lookup of registration: DNS as delivery asks it (dnsAddresses). */
export const dnsLookup: Lookup = async (hostname) => (await dnsAddresses(hostname)).map((a) => a.address);

export interface UrlPolicy {
  /** WEBHOOK_ALLOW_PRIVATE: `http://` and internal addresses are accepted (local development, tests). */
  allowPrivate: boolean;
  lookup?: Lookup;
  /** How long a name may take to resolve; one that takes longer counts as not resolving yet. */
  lookupTimeoutMs?: number;
}

/**
 * Addresses that are not on the public internet (RFC 6890 and its IPv6
 * registry): unspecified, loopback, private, shared (CGNAT), link-local,
 * documentation and benchmarking ranges, multicast, reserved. An endpoint
 * must not point at any of them: the service would otherwise post to its own
 * network on a client's behalf (server-side request forgery).
 */
const INTERNAL = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) INTERNAL.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  // ::/96 holds the unspecified address, loopback and the deprecated IPv4-compatible addresses.
  ['::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001::', 23], ['2001:db8::', 32], ['3fff::', 20], ['5f00::', 16],
  ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
] as const) INTERNAL.addSubnet(net, bits, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a trailing dotted quad included). */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const part = (s: string | undefined) => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const left = part(head);
  const right = part(tail);
  return tail === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

const quadOf = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;

/**
 * The IPv4 address an IPv6 one stands for, where it embeds one that a
 * packet would reach: IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::/96),
 * 6to4 (2002:aabb:ccdd::/48).
 */
function embeddedIpv4(address: string): string | undefined {
  const g = ipv6Groups(address);
  if (g.length !== 8) return undefined;
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return quadOf(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return quadOf(g[6]!, g[7]!);
  if (g[0] === 0x2002) return quadOf(g[1]!, g[2]!);
  return undefined;
}

/** Whether `address` (an IPv4 or IPv6 literal) is loopback, private, link-local or otherwise not public. */
export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return INTERNAL.check(address, 'ipv4');
  if (family !== 6) return true;
  const v4 = embeddedIpv4(address);
  return INTERNAL.check(address, 'ipv6') || (v4 !== undefined && INTERNAL.check(v4, 'ipv4'));
}

/** The name's addresses; none when it does not resolve (yet), whatever the reason: accepted, the delivery checks it again. */
async function resolve(hostname: string, lookup: Lookup, timeoutMs: number): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string[]>((ok) => {
    timer = setTimeout(() => ok([]), timeoutMs);
    timer.unref();
  });
  try {
    return await Promise.race([
      lookup(hostname).catch(() => []),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What is wrong with a webhook endpoint's URL, as a 422's message, or
 * undefined when it may be saved (contract section 10): absolute, `https://`,
 * no credentials in it, and neither an IP literal nor a name that resolves to
 * a loopback, private, link-local or otherwise internal address (IPv4 and
 * IPv6, IPv4 embedded in IPv6 included). A name that does not resolve is
 * accepted: the delivery checks every address again. WEBHOOK_ALLOW_PRIVATE
 * lifts the scheme and address rules.
 */
export async function endpointUrlProblem(text: string, policy: UrlPolicy): Promise<string | undefined> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'Value error, url must be an absolute URL';
  }
  const schemes = policy.allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) return `Value error, url must use ${policy.allowPrivate ? 'https:// or http://' : 'https://'}`;
  if (url.username !== '' || url.password !== '') return 'Value error, url must not hold credentials: send them as a custom header';
  if (policy.allowPrivate) return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const refused = (address: string) => `Value error, url must not point at a loopback, private, link-local or otherwise internal address (${address})`;
  if (isIP(host) !== 0) return isInternalAddress(host) ? refused(host) : undefined;
  const name = host.replace(/\.$/, '').toLowerCase();
  if (isLoopbackName(name)) return refused(name);
  const addresses = await resolve(name, policy.lookup ?? dnsLookup, policy.lookupTimeoutMs ?? 2000);
  const internal = addresses.find(isInternalAddress);
  return internal === undefined ? undefined : refused(`${name} resolves to ${internal}`);
}
