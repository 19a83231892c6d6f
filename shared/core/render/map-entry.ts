/*
 * The value under a key of a Map, made and stored on first use: Map.prototype.getOrInsertComputed
 * is not in Node 20.
 */

export function entryOf<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}
