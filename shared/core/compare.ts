/*
 * Sort order of names and keys. Rendered configs, metrics and settings digests must be the same
 * bytes on every machine, so strings are ordered by UTF-16 code unit, never by locale.
 */

/** Code-unit order of two strings (what `<` says), for Array.prototype.sort. */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
