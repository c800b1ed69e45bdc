import { Counter, Gauge, type Registry } from 'prom-client';
import type { Sql } from '../db/client.js';
import { backlog } from './claims.js';
import type { DeliveryStats } from './dispatcher.js';

/**
 * The delivery on /metrics: attempts by outcome (this process's), and the
 * messages not delivered by state with the oldest pending one's age (the
 * database's, one query per scrape; claims.ts, backlog).
 */
export function registerDeliveryMetrics(registry: Registry, sql: Sql, stats: DeliveryStats): void {
  new Counter({
    name: 'hds_webhook_attempts_total', labelNames: ['outcome'] as const, registers: [registry],
    help: 'Webhook delivery attempts of this process by outcome: delivered; retried (failed, a retry is scheduled); exhausted (failed, no retry left: the message is failed)',
    collect() {
      this.reset();
      this.inc({ outcome: 'delivered' }, stats.delivered);
      this.inc({ outcome: 'retried' }, stats.retried);
      this.inc({ outcome: 'exhausted' }, stats.exhausted);
    },
  });
  new Counter({
    name: 'hds_webhook_endpoints_disabled_total', registers: [registry],
    help: 'Webhook endpoints this process disabled (a 410 answer, or every attempt failed for WEBHOOK_DISABLE_AFTER)',
    collect() { this.reset(); this.inc(stats.endpointsDisabled); },
  });
  let inflight: ReturnType<typeof backlog> | undefined;
  const read = () => {
    inflight ??= backlog(sql).finally(() => { inflight = undefined; });
    return inflight.catch(() => undefined);
  };
  new Gauge({
    name: 'hds_webhook_messages', labelNames: ['state'] as const, registers: [registry],
    help: 'Webhook messages not delivered, by state (pending: to be attempted; held: pending at a disabled endpoint; failed: no retry left, until recovered)',
    async collect() {
      const now = await read();
      this.reset();
      if (now) {
        this.set({ state: 'pending' }, now.pending);
        this.set({ state: 'held' }, now.held);
        this.set({ state: 'failed' }, now.failed);
      }
    },
  });
  new Gauge({
    name: 'hds_webhook_oldest_pending_seconds', registers: [registry],
    help: 'Age of the oldest pending webhook message of an enabled endpoint (0: none)',
    async collect() {
      const now = await read();
      if (now) this.set(now.oldestPendingSeconds);
    },
  });
}
