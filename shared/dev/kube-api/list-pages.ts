/*
 * A list, in pages as the real server cuts them: every page of one list reads the revision of its
 * first (a continue token carries it, opaque to clients), `remainingItemCount` only where the
 * server need not filter, and a token from before a compaction — or one the test expired —
 * answers 410 Expired with a fresh token to go on from.
 */
import type { LabelSelector } from "../../core/kubernetes/label-selector.js";
import { KINDS, type KubeObject } from "./kinds.js";
import { inScope, matches, type Route } from "./paths.js";
import type { Revisions } from "./revisions.js";
import { badRequest, KubeStatusError } from "./status-error.js";

const EXPIRED_MESSAGE =
  "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

export interface ListRequest {
  route: Route;
  selector: LabelSelector;
  query: Record<string, string>;
  /** Tokens of an older generation answer 410: the test expired them. */
  tokenGeneration: number;
}

/** The list response's JSON text for one page. */
export function listPage(revisions: Revisions, { route, selector, query, tokenGeneration }: ListRequest): string {
  const info = KINDS[route.kind];
  let listRv = revisions.revision;
  let after = "";
  if (query.continue) {
    const token = decodeContinue(query.continue);
    if (token.gen !== tokenGeneration || token.rv < revisions.compactedAt) {
      const fresh = encodeContinue({ rv: revisions.revision, start: token.start, gen: tokenGeneration });
      throw new KubeStatusError(410, "Expired", EXPIRED_MESSAGE, { metadata: { continue: fresh } });
    }
    listRv = token.rv;
    after = token.start;
  }
  // Pages of one list come from the same revision, as the real server's consistent snapshot does.
  const sorted = revisions.sortedAt(route.kind, listRv);
  const limit = Number(query.limit ?? 0);
  const page: Array<[string, KubeObject]> = [];
  let rest = 0;
  for (let i = after === "" ? 0 : firstAfter(sorted, after); i < sorted.length; i++) {
    const entry = sorted[i]!;
    if (!inScope(route, entry[1]) || !matches(selector, entry[1])) continue;
    if (limit > 0 && page.length === limit) {
      // Only the remaining count is still needed, and only without a selector (see below).
      if (selector.length > 0) rest = 1;
      else if (route.namespace === undefined) rest = sorted.length - i;
      else for (let j = i; j < sorted.length; j++) if (inScope(route, sorted[j]![1])) rest++;
      break;
    }
    page.push(entry);
  }
  const metadata: Record<string, unknown> = { resourceVersion: String(listRv) };
  if (rest > 0) {
    metadata.continue = encodeContinue({ rv: listRv, start: page[page.length - 1]![0], gen: tokenGeneration });
    // The real server counts the rest only when it need not filter.
    if (selector.length === 0) metadata.remainingItemCount = rest;
  }
  const items = page.map(([, obj]) => itemJson(obj));
  return `{"kind":${JSON.stringify(info.listKind)},"apiVersion":${JSON.stringify(info.apiVersion)},"metadata":${JSON.stringify(metadata)},"items":[${items.join(",")}]}`;
}

/** A list item's JSON, per stored object. */
const serialized = new WeakMap<KubeObject, string>();

/**
 * Items inside a real list response carry no apiVersion/kind; the list itself does. Stored objects
 * never change (a write stores a new one), so each is serialized once, not once per list.
 */
function itemJson(obj: KubeObject): string {
  let text = serialized.get(obj);
  if (text === undefined) {
    const { apiVersion: _apiVersion, kind: _kind, ...rest } = obj;
    text = JSON.stringify(rest);
    serialized.set(obj, text);
  }
  return text;
}

/** Index of the first entry whose key sorts after `key`. */
function firstAfter(sorted: Array<[string, KubeObject]>, key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]![0] <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

interface ContinueToken {
  rv: number;
  start: string;
  gen: number;
}

/** Opaque to clients, like the real token (base64 JSON with the list revision and the last key). */
function encodeContinue(token: ContinueToken): string {
  return Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", ...token })).toString("base64url");
}

function decodeContinue(text: string): ContinueToken {
  try {
    const t = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as Partial<ContinueToken> & { v?: string };
    if (
      t.v === "meta.k8s.io/v1" &&
      typeof t.rv === "number" &&
      typeof t.start === "string" &&
      typeof t.gen === "number"
    ) {
      return { rv: t.rv, start: t.start, gen: t.gen };
    }
  } catch {
    // fall through to the same answer the real server gives for garbage
  }
  throw badRequest(`continue key is not valid: ${text}`);
}
