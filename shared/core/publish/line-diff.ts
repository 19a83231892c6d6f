/*
 * A unified line diff (the `diff -u` format) for `servicelb diff`. Myers' O(ND) algorithm on the
 * lines between the common prefix and suffix: two configs of one cluster usually differ in a few
 * backends, so D is small even when the files are large.
 */

export interface UnifiedDiffOptions {
  fromLabel: string;
  toLabel: string;
  /** Unchanged lines around each change. Default 3. */
  context?: number;
  /**
   * Above this many changed lines the middle is shown as removed and re-added instead of searched
   * for the shortest edit (whose bookkeeping grows with the square of the changes). Default 4000.
   */
  maxEdits?: number;
}

type Op = { op: " " | "-" | "+"; line: string };

/** "" when the texts are equal. */
export function unifiedDiff(from: string, to: string, options: UnifiedDiffOptions): string {
  if (from === to) return "";
  const a = splitLines(from);
  const b = splitLines(to);
  const context = options.context ?? 3;

  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const middle = editScript(midA, midB, options.maxEdits ?? 4000) ?? [
    ...midA.map((line): Op => ({ op: "-", line })),
    ...midB.map((line): Op => ({ op: "+", line })),
  ];
  const ops: Op[] = [
    ...a.slice(0, start).map((line): Op => ({ op: " ", line })),
    ...middle,
    ...a.slice(endA).map((line): Op => ({ op: " ", line })),
  ];
  return `--- ${options.fromLabel}\n+++ ${options.toLabel}\n${hunks(ops, context)}`;
}

/** Lines with their "\n", so that a missing final newline is a difference like any other. */
function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** The shortest edit script from a to b, or null when it needs more than maxEdits edits. */
function editScript(a: string[], b: string[], maxEdits: number): Op[] | null {
  const n = a.length;
  const m = b.length;
  const off = n + m + 1;
  // v[off + k]: the furthest x reached on diagonal k (y = x - k).
  const v = new Int32Array(2 * off + 1);
  // trace[d]: v for k in [-d, d] before step d, to walk the path back.
  const trace: Int32Array[] = [];
  for (let d = 0; d <= n + m; d++) {
    if (d > maxEdits) return null;
    trace.push(v.slice(off - d, off + d + 1));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1]! < v[off + k + 1]!) ? v[off + k + 1]! : v[off + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b, d);
    }
  }
  return null;
}

function backtrack(trace: Int32Array[], a: string[], b: string[], edits: number): Op[] {
  const ops: Op[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = edits; d > 0; d--) {
    const t = trace[d]!;
    const at = (k: number) => t[k + d]!;
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push({ op: " ", line: a[--x]! });
      y--;
    }
    if (x === prevX) ops.push({ op: "+", line: b[--y]! });
    else ops.push({ op: "-", line: a[--x]! });
  }
  while (x > 0) {
    ops.push({ op: " ", line: a[--x]! });
  }
  return ops.reverse();
}

function hunks(ops: Op[], context: number): string {
  const changed = ops.flatMap((step, i) => (step.op === " " ? [] : [i]));
  // lineA[i], lineB[i]: the line numbers op i sits at in each file.
  const lineA = new Int32Array(ops.length + 1);
  const lineB = new Int32Array(ops.length + 1);
  lineA[0] = lineB[0] = 1;
  ops.forEach((step, i) => {
    lineA[i + 1] = lineA[i]! + (step.op === "+" ? 0 : 1);
    lineB[i + 1] = lineB[i]! + (step.op === "-" ? 0 : 1);
  });
  let out = "";
  let i = 0;
  while (i < changed.length) {
    // Changes closer than twice the context share a hunk.
    let j = i;
    while (j + 1 < changed.length && changed[j + 1]! - changed[j]! <= 2 * context) j++;
    const from = Math.max(0, changed[i]! - context);
    const to = Math.min(ops.length, changed[j]! + context + 1);
    out += `@@ -${range(lineA[from]!, lineA[to]! - lineA[from]!)} +${range(lineB[from]!, lineB[to]! - lineB[from]!)} @@\n`;
    for (const o of ops.slice(from, to))
      out += o.line.endsWith("\n") ? `${o.op}${o.line}` : `${o.op}${o.line}\n\\ No newline at end of file\n`;
    i = j + 1;
  }
  return out;
}

/** GNU diff's notation: ",1" is left out, and an empty range names the line before it. */
function range(start: number, count: number): string {
  if (count === 0) return `${start - 1},0`;
  return count === 1 ? `${start}` : `${start},${count}`;
}
