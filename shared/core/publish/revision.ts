/*
 * Cluster revisions. Kubernetes resourceVersions are opaque strings; etcd's are decimal integers,
 * and servicelb orders snapshots by them: a list's revision is the highest it saw, and a published
 * config's key carries its snapshot's revision (config-key.ts), parsed here.
 */

import { compareStrings } from "../compare.js";
import { REVISION_DIGITS } from "./config-key.js";

const DECIMAL = /^0*([0-9]{1,30})$/;

/** The digits of a decimal resourceVersion without leading zeros, or null for anything else. */
export function decimalRevision(value: unknown): string | null {
  return typeof value === "string" ? (DECIMAL.exec(value)?.[1] ?? null) : null;
}

/**
 * Order of two resourceVersions: decimal ones by value (without BigInt: it runs once per listed
 * item); others have no defined order, so at least a deterministic one, by text.
 */
export function compareRevisions(a: string, b: string): number {
  const da = decimalRevision(a);
  const db = decimalRevision(b);
  if (da === null || db === null) return compareStrings(a, b);
  return da.length - db.length || compareStrings(da, db);
}

/** The newer of two resourceVersions; "" is none, and "0" when neither is given. */
export function newerRevision(a: string, b: string): string {
  if (!a || !b) return a || b || "0";
  return compareRevisions(b, a) > 0 ? b : a;
}

/** A snapshot's revision as a number, for the store's keys: it must be decimal to order snapshots. */
export function parseRevision(revision: string): bigint {
  if (!/^\d+$/.test(revision)) {
    throw new Error(`snapshot revision must be a decimal resourceVersion, got ${JSON.stringify(revision)}`);
  }
  const value = BigInt(revision);
  if (value.toString().length > REVISION_DIGITS) {
    throw new Error(`snapshot revision ${revision} has more than ${REVISION_DIGITS} digits`);
  }
  return value;
}
