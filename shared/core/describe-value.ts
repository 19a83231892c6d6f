/*
 * A user's value as servicelb's warnings and errors show it: quoted, so that spaces and control
 * characters are visible, and cut short, so that a hostile annotation cannot flood a log line.
 */

export function describeValue(value: string): string {
  const shown = value.length > 64 ? `${value.slice(0, 64)}…` : value;
  return JSON.stringify(shown);
}
