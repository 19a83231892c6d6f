/*
 * The open watch streams: each replays the changes after its resourceVersion (or the current
 * objects as ADDED events when it names none), then receives every write as it is stored, until
 * its timeout or endAll(). A compacted revision is an ERROR event, as the real server sends it.
 */
import type http from "node:http";
import type { LabelSelector } from "../../core/kubernetes/label-selector.js";
import { inScope, matches, type Route } from "./paths.js";
import type { Change, EventType, Revisions } from "./revisions.js";
import { badRequest } from "./status-error.js";

/**
 * Upper bound of a watch request, like the real server's --min-request-timeout; the client's
 * timeoutSeconds may shorten it. Tests that need a stream to end call endWatches() instead.
 */
const WATCH_TIMEOUT_MS = 60_000;

interface Watcher {
  route: Route;
  selector: LabelSelector;
  res: http.ServerResponse;
}

export class WatchStreams {
  private watchers = new Set<Watcher>();

  constructor(private readonly revisions: Revisions) {}

  open(route: Route, selector: LabelSelector, query: Record<string, string>, res: http.ServerResponse): void {
    const from = query.resourceVersion;
    const fromRv = from === undefined || from === "" || from === "0" ? undefined : Number(from);
    if (fromRv !== undefined && !(Number.isInteger(fromRv) && fromRv >= 0)) {
      throw badRequest(`invalid resource version: ${from}`);
    }
    res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
    // The real server answers the head at once; a client may wait for it before the first event.
    res.flushHeaders();
    const watcher: Watcher = { route, selector, res };
    if (fromRv !== undefined && fromRv < this.revisions.compactedAt) {
      // The real server reports a compacted revision as an ERROR event, then ends the stream.
      const status = {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: `too old resource version: ${fromRv} (${this.revisions.compactedAt})`,
        reason: "Expired",
        code: 410,
      };
      res.end(`${JSON.stringify({ type: "ERROR", object: status })}\n`);
      return;
    }
    if (fromRv === undefined) {
      // No resourceVersion: synthetic ADDED events for the current state, then changes.
      for (const obj of this.revisions.objects(route.kind)) {
        if (inScope(route, obj) && matches(selector, obj))
          res.write(`${JSON.stringify({ type: "ADDED", object: obj })}\n`);
      }
    } else {
      for (const change of this.revisions.changesAfter(route.kind, fromRv)) push(watcher, change);
    }
    this.watchers.add(watcher);
    const requested = Number(query.timeoutSeconds ?? 0) * 1000;
    const timer = setTimeout(() => res.end(), requested > 0 ? Math.min(requested, WATCH_TIMEOUT_MS) : WATCH_TIMEOUT_MS);
    res.on("close", () => {
      clearTimeout(timer);
      this.watchers.delete(watcher);
    });
  }

  /** A stored write, to every stream that watches its kind. */
  publish(change: Change): void {
    for (const w of this.watchers) {
      if (w.route.kind === change.kind) push(w, change);
    }
  }

  /** Ends every open stream, as the real server does when a watch's timeout elapses. */
  endAll(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }
}

function push(w: Watcher, change: Change): void {
  if (!inScope(w.route, change.object)) return;
  const was = change.prev !== undefined && matches(w.selector, change.prev);
  const is = change.type !== "DELETED" && matches(w.selector, change.object);
  // Like the real server, a selector-filtered watch sees an object leave or enter its selection.
  const type: EventType | undefined =
    change.type === "DELETED"
      ? was
        ? "DELETED"
        : undefined
      : was && is
        ? "MODIFIED"
        : is
          ? "ADDED"
          : was
            ? "DELETED"
            : undefined;
  if (type) w.res.write(`${JSON.stringify({ type, object: change.object })}\n`);
}
