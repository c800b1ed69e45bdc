import type { PlannedRequest } from './load-plan.js';

/** One answer of the real service, kept byte for byte for the floor server to replay. */
export interface CapturedResponse {
  method: string;
  url: string;
  status: number;
  headers: Record<string, string>;
  /** Base64 of the exact body bytes. */
  body: string;
}

/** Headers the floor's own HTTP stack writes (or that describe this one connection). */
const PER_CONNECTION = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);

/** Sends the request to the service and keeps its answer. A write's capture is a write: its scenario must allow for it. */
export async function capture(baseUrl: string, request: PlannedRequest): Promise<CapturedResponse> {
  const method = request.method ?? 'GET';
  const res = await fetch(baseUrl + request.path, { method, headers: request.headers, body: request.body });
  const body = Buffer.from(await res.arrayBuffer());
  const kept: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (!PER_CONNECTION.has(name)) kept[name] = value;
  });
  return { method, url: request.path, status: res.status, headers: kept, body: body.toString('base64') };
}
