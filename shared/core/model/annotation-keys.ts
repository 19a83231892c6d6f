import { ANNOTATION_PREFIX, ANNOTATIONS, type AnnotationWarning } from "./annotations.js";
import { SETTING_ANNOTATIONS } from "./backend-settings.js";

/** Every `serviceloadbalancer/` annotation servicelb reads. */
export const KNOWN_ANNOTATIONS: ReadonlySet<string> = new Set([
  ...Object.values(ANNOTATIONS),
  ...Object.values(SETTING_ANNOTATIONS),
]);

/** Farther than this from every known name, a key is not taken for a typo of one. */
const MAX_TYPO_DISTANCE = 3;

/**
 * A `serviceloadbalancer/` key that servicelb does not read is ignored, like any annotation; it is
 * said, because it is a typo more often than not (`lb.hots`), which would otherwise leave the
 * Service routed as if the setting were not there, without a word.
 */
export function unknownAnnotationWarnings(annotations: Readonly<Record<string, string>>): AnnotationWarning[] {
  const warnings: AnnotationWarning[] = [];
  for (const key of Object.keys(annotations)) {
    if (!key.startsWith(ANNOTATION_PREFIX) || KNOWN_ANNOTATIONS.has(key)) continue;
    const near = nearest(key);
    warnings.push({
      annotation: key,
      message: `not an annotation servicelb reads; ignored${near ? ` (did you mean ${near}?)` : " (docs/annotations.md lists them)"}`,
    });
  }
  return warnings;
}

function nearest(key: string): string | undefined {
  let best: string | undefined;
  let bestDistance = MAX_TYPO_DISTANCE + 1;
  for (const known of KNOWN_ANNOTATIONS) {
    const d = editDistance(key.toLowerCase(), known.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [known, d];
  }
  return best;
}

/** Levenshtein distance, one row at a time. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next.push(Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    row = next;
  }
  return row[b.length]!;
}
