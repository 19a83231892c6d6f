/*
 * A value as servicelb's warnings, errors and reasons show it (an annotation, a config line):
 * quoted, so that spaces and control characters are visible, and cut short at `max` characters,
 * so that a hostile annotation cannot flood a log line.
 */

export function describeValue(value: string, max = 64): string {
  const shown = value.length > max ? `${value.slice(0, max)}…` : value;
  return JSON.stringify(shown);
}
