/*
 * The order of published configs (docs/design.md#invariant-1-the-latest-decision-wins), in one
 * place: the publisher, the agent, `status` and `history` all compare keys with compareConfigNames.
 *
 * A config's name is `<epoch>-<revision>-<seq>-<sha>.cfg`, fixed width, so that among these names
 * string order is decision order:
 *   epoch     6 digits   advances when the cluster's revisions go back (restore, new cluster)
 *   revision 20 digits   the snapshot's cluster revision (etcd revisions are int64: ≤ 19 digits)
 *   seq      10 digits   0, or the newest config's seq + 1 for a later publish of its view, which wins
 *   sha      16 hex      the first 64 bits of the body's digest (config-digest.ts: sha256 or tree1)
 * Names of the first format, `<revision>-<sha>.cfg`, are still read as epoch 0, seq 0, so that a
 * store written by an older servicelb keeps working; they do not sort with the new ones as
 * strings ('-' sorts before digits), which is why nobody may compare names as plain strings.
 *
 * A view marker `<epoch>-<revision>` (no config, see publish-order.ts) uses the first two fields.
 * Which keys may be followed at all is key-trust.ts's to say.
 */

import { compareStrings } from "../compare.js";

export const EPOCH_DIGITS = 6;
export const REVISION_DIGITS = 20;
export const SEQ_DIGITS = 10;
export const KEY_SHA_CHARS = 16;
export const MAX_EPOCH = 10 ** EPOCH_DIGITS - 1;
export const MAX_SEQ = 10 ** SEQ_DIGITS - 1;

const NAME = /^(\d{6})-(\d{20})-(\d{10})-([0-9a-f]{16})\.cfg$/;
const LEGACY_NAME = /^(\d{20})-([0-9a-f]{16})\.cfg$/;
const VIEW_NAME = /^(\d{6})-(\d{20})$/;

export interface ConfigName {
  epoch: number;
  revision: bigint;
  seq: number;
  shaPrefix: string;
  /** Written by servicelb before epochs and seqs existed. */
  legacy: boolean;
}

/** A point in the cluster's history as the store knows it: the newest config's, or a view marker's. */
export interface Mark {
  epoch: number;
  revision: bigint;
}

export function formatConfigName(n: Omit<ConfigName, "legacy">): string {
  if (!Number.isInteger(n.epoch) || n.epoch < 0 || n.epoch > MAX_EPOCH)
    throw new Error(`epoch ${n.epoch} does not fit ${EPOCH_DIGITS} digits`);
  if (!Number.isInteger(n.seq) || n.seq < 0 || n.seq > MAX_SEQ)
    throw new Error(`seq ${n.seq} does not fit ${SEQ_DIGITS} digits`);
  return `${pad(n.epoch, EPOCH_DIGITS)}-${pad(n.revision, REVISION_DIGITS)}-${pad(n.seq, SEQ_DIGITS)}-${n.shaPrefix}.cfg`;
}

/** The fields of a config name (the part after `configs/`), or null for anything else. */
export function parseConfigName(name: string): ConfigName | null {
  const m = NAME.exec(name);
  if (m) return { epoch: Number(m[1]), revision: BigInt(m[2]!), seq: Number(m[3]), shaPrefix: m[4]!, legacy: false };
  const old = LEGACY_NAME.exec(name);
  if (old) return { epoch: 0, revision: BigInt(old[1]!), seq: 0, shaPrefix: old[2]!, legacy: true };
  return null;
}

/** The config name at the end of a store key (`<prefix>configs/<name>`), or null. */
export function parseConfigKey(key: string): ConfigName | null {
  const at = key.lastIndexOf("configs/");
  if (at < 0 || (at > 0 && key[at - 1] !== "/")) return null;
  return parseConfigName(key.slice(at + "configs/".length));
}

export function compareConfigNames(a: ConfigName, b: ConfigName): number {
  return compareMarks(a, b) || a.seq - b.seq || compareStrings(a.shaPrefix, b.shaPrefix);
}

/**
 * Decision order of two store keys; a key that is not a config key sorts before every config key
 * (it is never newer than anything). Keys of one store share its prefix, which is not compared.
 */
export function compareConfigKeys(a: string, b: string): number {
  const pa = parseConfigKey(a);
  const pb = parseConfigKey(b);
  if (!pa || !pb) return (pa ? 1 : 0) - (pb ? 1 : 0);
  return compareConfigNames(pa, pb);
}

export function compareMarks(a: Mark, b: Mark): number {
  return a.epoch - b.epoch || (a.revision < b.revision ? -1 : a.revision > b.revision ? 1 : 0);
}

export function formatViewName(m: Mark): string {
  return `${pad(m.epoch, EPOCH_DIGITS)}-${pad(m.revision, REVISION_DIGITS)}`;
}

export function parseViewName(name: string): Mark | null {
  const m = VIEW_NAME.exec(name);
  return m ? { epoch: Number(m[1]), revision: BigInt(m[2]!) } : null;
}

function pad(n: number | bigint, digits: number): string {
  return n.toString().padStart(digits, "0");
}
