/*
 * The split of the configs an agent holds (core/pattern-files.ts splitConfig), each made once: an
 * apply splits the running config and the new one to decide, and the new one again to write its
 * pattern files, and the new one is the running one of the next apply. Each split validates every
 * pattern line of the config. Keyed by the text itself; the newest two kept.
 */

import { splitConfig } from "../core/pattern-files.js";

export type Split = ReturnType<typeof splitConfig>;
export type Splitter = (text: string) => Split;

const KEPT = 2;

export function splitMemo(): Splitter {
  const recent: Array<{ text: string; split: Split }> = [];
  return (text) => {
    const hit = recent.find((r) => r.text === text);
    if (hit) return hit.split;
    const split = splitConfig(text);
    recent.unshift({ text, split });
    recent.length = Math.min(recent.length, KEPT);
    return split;
  };
}
