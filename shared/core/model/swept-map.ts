/*
 * The memory of a warm cache: values by namespace and name, each marked with the generation (one
 * pass over a list) that last saw it, so that what a pass no longer saw is forgotten at its end.
 * Keyed by namespace, then name: no key strings are built, which matters on a warm instance that
 * looks up 10,000 objects per pass. ParsedItems (validated objects) and ModelCache (Service plans)
 * keep theirs here.
 */

interface Entry<V> {
  value: V;
  generation: number;
}

export class SweptMap<V> {
  private readonly byNamespace = new Map<string, Map<string, Entry<V>>>();
  private current = 0;
  private entries = 0;
  private seen = 0;

  /** The pass under way; begin() starts the next. */
  get generation(): number {
    return this.current;
  }

  get size(): number {
    return this.entries;
  }

  begin(): void {
    this.current++;
    this.seen = 0;
  }

  get(namespace: string, name: string): V | undefined {
    return this.byNamespace.get(namespace)?.get(name)?.value;
  }

  /** Marks the entry seen by this pass; true the first time (a name listed twice counts once). */
  touch(namespace: string, name: string): boolean {
    const entry = this.byNamespace.get(namespace)?.get(name);
    if (!entry || entry.generation === this.current) return false;
    entry.generation = this.current;
    this.seen++;
    return true;
  }

  /** Stores a value seen by this pass. */
  set(namespace: string, name: string, value: V): void {
    let inNamespace = this.byNamespace.get(namespace);
    if (!inNamespace) {
      inNamespace = new Map();
      this.byNamespace.set(namespace, inNamespace);
    }
    const entry = inNamespace.get(name);
    if (!entry) {
      inNamespace.set(name, { value, generation: this.current });
      this.entries++;
      this.seen++;
      return;
    }
    entry.value = value;
    if (entry.generation !== this.current) {
      entry.generation = this.current;
      this.seen++;
    }
  }

  delete(namespace: string, name: string): void {
    const inNamespace = this.byNamespace.get(namespace);
    const entry = inNamespace?.get(name);
    if (!entry) return;
    inNamespace!.delete(name);
    this.entries--;
    if (entry.generation === this.current) this.seen--;
  }

  /** Forgets what this pass did not see; walks the map only when there is something to forget. */
  sweep(): void {
    if (this.entries === this.seen) return;
    for (const [namespace, inNamespace] of this.byNamespace) {
      for (const [name, entry] of inNamespace) {
        if (entry.generation === this.current) continue;
        inNamespace.delete(name);
        this.entries--;
      }
      if (inNamespace.size === 0) this.byNamespace.delete(namespace);
    }
  }
}
