import { createHmac } from 'node:crypto';

/**
 * The Standard Webhooks signature (what Svix sends as `svix-signature`):
 * `v1,` and the base64 of an HMAC-SHA256 over `<id>.<timestamp>.<body>`,
 * keyed with the secret's bytes (the base64 after `whsec_`). One per secret
 * that signs now (a rotation's overlap: two), separated by spaces.
 */
export function signatures(secrets: string[], id: string, timestamp: number, body: string): string {
  const signed = `${id}.${timestamp}.${body}`;
  return secrets
    .map((secret) => `v1,${createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64')).update(signed).digest('base64')}`)
    .join(' ');
}
