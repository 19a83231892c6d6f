/*
 * The plain-text tables of `servicelb history` and `servicelb status`: columns aligned for a
 * terminal, and still split by whitespace in a script (awk '{print $1}').
 */

/** Rows (the header first) as lines: every column but the last padded to its widest cell, two spaces apart. */
export function formatTable(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => r[c]?.length ?? 0))) ?? [];
  return rows
    .map((r) =>
      r
        .map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
