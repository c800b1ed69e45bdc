/**
 * Sets `key` as the newest entry of `map` (a Map keeps insertion order),
 * dropping the oldest when the map already holds `max` entries: the bound of
 * the in-memory caches (keys, metrics), whose oldest entry is the least
 * recently set.
 */
export function setNewest<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  }
  map.set(key, value);
}
