/*
 * The view markers beside the configs, views/<epoch>-<revision>: a pass that found nothing to
 * change saw this view (no config). Only the newest counts (core/publish/publish-order.ts
 * pickView); a publisher writes one and deletes those below it (config-publisher.ts).
 */

import { compareMarks, formatViewName, type Mark, parseViewName } from "../core/publish/config-key.js";
import type { BlobStore } from "./blob-store.js";
import { deleteKeys } from "./store-records.js";

const VIEWS = "views/";
/** View markers kept: only the newest counts; a few more cover a racing pass's delete. */
const VIEWS_KEPT = 5;

export interface ViewMarker {
  key: string;
  mark: Mark;
}

export class ViewMarkers {
  private readonly prefix: string;

  constructor(private readonly blobs: BlobStore) {
    this.prefix = `${blobs.prefix}${VIEWS}`;
  }

  /** The markers in the store, oldest first. */
  async list(): Promise<ViewMarker[]> {
    const views: ViewMarker[] = [];
    for (const object of await this.blobs.list(this.prefix)) {
      const mark = parseViewName(object.key.slice(this.prefix.length));
      if (mark) views.push({ key: object.key, mark });
    }
    return views.sort((a, b) => compareMarks(a.mark, b.mark));
  }

  /** Writes the marker of `mark` and deletes those of `views` below it but a few; returns its key. */
  async record(mark: Mark, generator: string, views: readonly ViewMarker[]): Promise<string> {
    const view = `${this.prefix}${formatViewName(mark)}`;
    await this.blobs.put(view, JSON.stringify({ generator }), { contentType: "application/json" });
    // Only the newest marker counts; a failed clean-up is retried by the next marker. Markers
    // above this one did not count (forged, or of a cluster that went back): left for the operator.
    const below = views.filter((v) => compareMarks(v.mark, mark) < 0);
    await deleteKeys(
      this.blobs,
      below.slice(0, -(VIEWS_KEPT - 1)).map((v) => v.key),
    ).catch(() => undefined);
    return view;
  }
}
