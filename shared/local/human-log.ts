import { pino, type Logger } from "pino";

const LEVELS: Record<number, string> = { 10: "trace", 20: "debug", 30: "", 40: "warn ", 50: "error ", 60: "fatal " };

/** A pino logger that writes one readable line per record, for people watching `npm start`. */
export function humanLogger(name: string): Logger {
  return pino(
    { name, level: process.env.LOG_LEVEL ?? "info", base: undefined },
    {
      write(line: string) {
        const { level, time, msg, name: _name, ...rest } = JSON.parse(line) as Record<string, unknown>;
        const clock = new Date(time as number).toISOString().slice(11, 19);
        const fields = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : "";
        process.stderr.write(`${clock} ${LEVELS[level as number] ?? ""}${String(msg)}${fields}\n`);
      },
    },
  );
}
