import { readFileSync } from "node:fs";
import { parseSnapshot, SnapshotError, type Snapshot } from "../core/snapshot.js";

/** A snapshot from a file ("-" is standard input), as `kubectl get … -o json|yaml` printed it. */
export function readSnapshotFile(path: string): Snapshot {
  let text: string;
  try {
    text = readFileSync(path === "-" ? 0 : path, "utf8");
  } catch (err) {
    throw new SnapshotError(`cannot read snapshot ${path}: ${(err as Error).message}`);
  }
  return parseSnapshot(text);
}
