/*
 * Work on many items with a bounded number in flight: the store's chunk uploads and fetches, the
 * reads of retained configs' metadata and of node records. (The notifier keeps its own loop: it
 * also stops at a deadline and counts what it never started.)
 */

/** Calls `work` on every item, at most `limit` at a time, in order of start; rejects as Promise.all does. */
export async function eachAtMost<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
