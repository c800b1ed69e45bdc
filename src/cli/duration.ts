const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "90d", "24h", "30m", "10s" to milliseconds; null when it is not such a duration. */
export function parseDuration(text: string): number | null {
  const m = /^(\d{1,6})([smhd])$/.exec(text.trim());
  return m ? Number(m[1]) * UNIT_MS[m[2]!]! : null;
}
