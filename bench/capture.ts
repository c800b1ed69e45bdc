/** One answer of the real service, kept byte for byte for the floor server to replay. */
export interface CapturedResponse {
  url: string;
  status: number;
  headers: Record<string, string>;
  /** Base64 of the exact body bytes. */
  body: string;
}

/** Headers the floor's own HTTP stack writes (or that describe this one connection). */
const PER_CONNECTION = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);

export async function capture(baseUrl: string, path: string, headers: Record<string, string>): Promise<CapturedResponse> {
  const res = await fetch(baseUrl + path, { headers });
  const body = Buffer.from(await res.arrayBuffer());
  const kept: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (!PER_CONNECTION.has(name)) kept[name] = value;
  });
  return { url: path, status: res.status, headers: kept, body: body.toString('base64') };
}
