import { pino, type Logger } from "pino";

/**
 * The local stack's console: every process's pino records (its own and its children's, relayed
 * from their stderr) in one stream, either as they are (JSON, for machines: when stderr is not a
 * terminal or when asked) or one readable line per record for people watching `npm start`.
 * Nothing is cut: a render warning or an error message is printed whole, and text that spans
 * lines (haproxy -c output, YAML error carets) keeps its lines instead of arriving as `\n` escapes.
 */
export type LogFormat = "human" | "json";

export interface Console {
  format: LogFormat;
  /** The stack's own logger. */
  log: Logger;
  /** One line of a child's output (a pino record, or plain text such as functions-framework's). */
  relay(name: string, line: string): void;
}

const LABELS: Record<number, string> = { 10: "TRACE ", 20: "DEBUG ", 30: "", 40: "WARN ", 50: "ERROR ", 60: "FATAL " };
const LEVELS: Record<string, number> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
  silent: Infinity,
};
const INDENT = "    ";

/** human on a terminal, json otherwise; `requested` (the --log-format flag, checked by the CLI) wins. */
export function consoleFormat(requested: LogFormat | undefined, isTTY: boolean): LogFormat {
  return requested ?? (isTTY ? "human" : "json");
}

export function createConsole(
  format: LogFormat,
  write: (text: string) => void = (t) => process.stderr.write(t),
  level = process.env.LOG_LEVEL ?? "info",
): Console {
  const threshold = LEVELS[level] ?? 30;
  const emit = (rec: Record<string, unknown>) => {
    if (typeof rec.level === "number" && rec.level < threshold) return;
    write(format === "json" ? `${JSON.stringify(rec)}\n` : formatRecord(rec));
  };
  const log = pino(
    { name: "local", level },
    { write: (line: string) => emit(JSON.parse(line) as Record<string, unknown>) },
  );
  return {
    format,
    log,
    relay(name, line) {
      if (line.trim() === "") return;
      const rec = parseRecord(line);
      // Several agents log under one logger name: the process's name tells the nodes apart.
      if (rec && typeof rec.name === "string" && rec.name !== name) rec.name = `${name}/${rec.name}`;
      emit(rec ?? { level: 30, time: Date.now(), name, msg: line });
    },
  };
}

function parseRecord(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const rec = JSON.parse(line) as unknown;
    return rec && typeof rec === "object" && typeof (rec as { msg?: unknown }).msg === "string"
      ? (rec as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `12:00:01 [agent] WARN message key=value …`, then one indented line per item of a list field
 * (render warnings), per line of a multi-line text, and the stack of an error record.
 */
export function formatRecord(rec: Record<string, unknown>): string {
  const { level, time, msg, name, pid: _pid, hostname: _hostname, ...fields } = rec;
  const clock = new Date(typeof time === "number" ? time : Date.now()).toISOString().slice(11, 19);
  const lvl = typeof level === "number" ? level : 30;
  const head = `${clock} ${name && name !== "local" ? `[${String(name)}] ` : ""}${LABELS[lvl] ?? ""}`;
  const inline: string[] = [];
  const below: string[] = [];
  const [first = "", ...rest] = String(msg).split("\n");
  below.push(...rest.map((l) => INDENT + l));
  for (const [key, value] of Object.entries(fields)) {
    if (isError(value)) {
      const [message = "", ...more] = value.message.split("\n");
      inline.push(`${key}=${scalar(message)}`);
      below.push(...more.map((l) => INDENT + l));
      // Transient failures are warnings whose message says it all; a stack helps with the rest.
      if (lvl >= 50 && value.stack)
        below.push(
          ...value.stack
            .split("\n")
            .filter((l) => /^\s+at /.test(l))
            .map((l) => INDENT + l.trim()),
        );
    } else if (Array.isArray(value) && value.some((v) => v !== null && typeof v === "object")) {
      below.push(
        `${INDENT}${key}:`,
        ...value.map(
          (v) => `${INDENT}- ${v !== null && typeof v === "object" ? pairs(v as Record<string, unknown>) : scalar(v)}`,
        ),
      );
    } else if (typeof value === "string" && value.includes("\n")) {
      below.push(`${INDENT}${key}:`, ...value.split("\n").map((l) => INDENT + INDENT + l));
    } else {
      inline.push(
        `${key}=${typeof value === "object" && value !== null && !Array.isArray(value) ? `{${pairs(value as Record<string, unknown>)}}` : scalar(value)}`,
      );
    }
  }
  return `${head}${first}${inline.length > 0 ? `  ${inline.join(" ")}` : ""}\n${below.map((l) => `${l}\n`).join("")}`;
}

function isError(v: unknown): v is { message: string; stack?: string } {
  return (
    v !== null &&
    typeof v === "object" &&
    typeof (v as { message?: unknown }).message === "string" &&
    ("stack" in v || "type" in v)
  );
}

function pairs(o: Record<string, unknown>): string {
  return Object.entries(o)
    .map(([k, v]) => `${k}=${v !== null && typeof v === "object" ? JSON.stringify(v) : scalar(v)}`)
    .join(" ");
}

/** Bare when unambiguous, JSON-quoted when it has spaces, quotes or is empty. */
function scalar(v: unknown): string {
  if (typeof v !== "string") return JSON.stringify(v) ?? String(v);
  return v === "" || /[\s"=]/.test(v) ? JSON.stringify(v) : v;
}
