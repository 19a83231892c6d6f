import { readFileSync } from "node:fs";
import { parseSnapshot, SnapshotError, type Snapshot } from "../core/kubernetes/snapshot.js";
import { errorMessage } from "../core/error-message.js";

/**
 * A snapshot from a file ("-" is standard input), as `kubectl get … -o json|yaml` printed it.
 * `flag` names where the path came from, as the errors of the other file flags do.
 */
export function readSnapshotFile(path: string, flag: string): Snapshot {
  let text: string;
  try {
    text = readFileSync(path === "-" ? 0 : path, "utf8");
  } catch (err) {
    throw new SnapshotError(`${flag}: cannot read ${path}: ${errorMessage(err)}`);
  }
  return parseSnapshot(text);
}
