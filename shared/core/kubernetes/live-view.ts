/*
 * What a warm reconcile instance knows of the cluster between passes: its last full list, and the
 * objects read again since (head starts, app/head-start.ts), each stamped with when its read or list
 * started. Pure: the caller does the reads.
 *
 * A list subsumes every read that started before it: the event that named the object came before
 * that read, so a list started later already holds the change. A read that started after the list
 * did may hold a newer change than the list, so it is laid over the list, and stays laid over what
 * the instance renders until a later list subsumes it. Reads and lists may run side by side (a head
 * start while a full list is on its way); reads run one at a time, and so do lists.
 */

import { overlaySnapshot, type FreshReads } from "./snapshot-overlay.js";
import type { Snapshot } from "./snapshot.js";

export class LiveView<S extends Snapshot> {
  private clock = 0;
  private list: { ticket: number; snapshot: S } | undefined;
  private reads: Array<{ ticket: number; fresh: FreshReads }> = [];
  private composed: S | undefined;

  /** Taken when a read or a list starts, and handed back with what it read. */
  ticket(): number {
    return ++this.clock;
  }

  /** The list with the reads laid over it that it does not subsume; undefined before the first list. */
  get snapshot(): S | undefined {
    return this.composed;
  }

  /** A full list arrived. A list that started before the one held (it cannot be newer) changes nothing. */
  listed(ticket: number, snapshot: S): S {
    if (this.list && this.list.ticket > ticket) return this.composed!;
    this.list = { ticket, snapshot };
    this.reads = this.reads.filter((r) => r.ticket > ticket);
    this.composed = this.reads.reduce(lay, snapshot);
    return this.composed;
  }

  /** Objects read again; undefined while there is no list to lay them over. */
  read(ticket: number, fresh: FreshReads): S | undefined {
    if (!this.list || !this.composed) return undefined;
    if (ticket < this.list.ticket) return this.composed;
    this.reads.push({ ticket, fresh });
    this.composed = lay(this.composed, { fresh });
    return this.composed;
  }

  /** After the cluster's revisions went back, nothing read before may be trusted. */
  forget(): void {
    this.list = undefined;
    this.reads = [];
    this.composed = undefined;
  }
}

function lay<S extends Snapshot>(snapshot: S, read: { fresh: FreshReads }): S {
  return { ...snapshot, ...overlaySnapshot(snapshot, read.fresh) };
}
