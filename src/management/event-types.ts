/**
 * The event types of contract section 10: what a webhook endpoint's
 * `filter_types` may name. The first is the upstream's; the others are ours,
 * named in the same style.
 */
export const EVENT_TYPES = [
  'provider.connection.created',
  'provider.connection.deleted',
  'user.created',
  'user.updated',
  'user.deleted',
  'user.restored',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
