/**
 * A double-quoted HAProxy config string that yields exactly `text`. Inside quotes HAProxy still
 * expands `${VAR}` and honours backslash escapes, and a raw newline would end the directive, so
 * everything but plain printable ASCII is written as an escape (\xNN for each UTF-8 byte).
 */
export function haproxyQuote(text: string): string {
  let out = '"';
  for (const byte of Buffer.from(text, "utf8")) {
    if (byte === 0x5c) out += "\\\\";
    else if (byte === 0x22) out += '\\"';
    else if (byte === 0x24) out += "\\$";
    else if (byte === 0x27) out += "\\'";
    else if (byte === 0x23) out += "\\#";
    else if (byte === 0x0a) out += "\\n";
    else if (byte === 0x0d) out += "\\r";
    else if (byte === 0x09) out += "\\t";
    else if (byte >= 0x20 && byte < 0x7f) out += String.fromCharCode(byte);
    else out += `\\x${byte.toString(16).padStart(2, "0")}`;
  }
  return `${out}"`;
}
