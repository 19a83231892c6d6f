import { isIP } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import {
  isPatternFilePath,
  type PatternFile,
  patternFileKind,
  patternLineError,
} from "../../core/haproxy-config/pattern-files.js";
import { commandText, type RuntimeCommand, runtimeLines } from "../../core/haproxy-config/runtime-plan.js";
import { cliBatch, cliCommand, cliExchange, type CliOptions } from "./cli.js";
import { errorMessage } from "../../core/error-message.js";

/** HAProxy answered a runtime command with an error message instead of doing it. */
export class RuntimeApiError extends Error {
  constructor(
    readonly command: string,
    readonly answer: string,
  ) {
    super(`HAProxy runtime API: "${command}" failed: ${answer.split("\n")[0]}`);
    this.name = "RuntimeApiError";
  }
}

// First lines of the error answers of the 2.6 stats CLI (cli_err() messages and usage texts).
const ERROR_ANSWER =
  /^(No such |Unknown command|Permission denied|Can't find |Invalid |Missing |Require |usage: |'[^']+' (expects|only supports))/i;

/** A command on the stats/admin socket (`stats socket ... level admin`); throws RuntimeApiError on an error answer. */
export async function runtimeCommand(socketPath: string, cmd: string, opts?: CliOptions): Promise<string> {
  const answer = await cliCommand(socketPath, cmd, opts);
  if (ERROR_ANSWER.test(answer)) throw new RuntimeApiError(cmd, answer);
  return answer;
}

// The CLI tokenises on spaces; a name outside HAProxy's own character set cannot be a real proxy or server.
function checkName(kind: string, name: string): void {
  if (!/^[A-Za-z0-9_.:-]+$/.test(name))
    throw new Error(`invalid ${kind} name for the runtime API: ${JSON.stringify(name)}`);
}

/** The command line of a planned slot command, each part checked: nothing unvalidated is sent. */
function checkedCommandText(c: RuntimeCommand): string {
  checkName("backend", c.backend);
  checkName("server", c.server);
  if (c.op === "state") return commandText(c);
  const address = c.address.replace(/^\[(.*)\]$/, "$1");
  if (isIP(address) === 0) throw new Error(`not an IP address: ${JSON.stringify(c.address)}`);
  if (!Number.isInteger(c.port) || c.port < 1 || c.port > 65535) throw new Error(`invalid port: ${c.port}`);
  // A `;` would end the command and start another on the CLI.
  if (c.op === "add" && !/^[A-Za-z0-9_.:/() -]*$/.test(c.params))
    throw new Error(`invalid server parameters for the runtime API: ${JSON.stringify(c.params)}`);
  return commandText({ ...c, address });
}

/** Whether HAProxy 2.6 answered a slot command with what it answers when it did it. */
function tookEffect(c: RuntimeCommand, answer: string): boolean {
  // An address: "IP changed from ..." or "no need to change the addr, ..." (2.6.12); a new
  // server: "New server registered."; a state: nothing.
  if (c.op === "add") return answer === "New server registered.";
  return c.op === "addr" ? /^(IP changed from|no need to change the addr)/.test(answer) : answer === "";
}

/** Some slot commands sent on the runtime API did not take effect, or their answers were lost. */
export class RuntimeCommandsError extends Error {
  constructor(
    /** How many of the commands took effect (HAProxy's CLI runs the rest of a line after a failed one). */
    readonly tookEffect: number,
    /** No answer to read: any of the commands sent may have taken effect. */
    readonly unknown: boolean,
    cause: unknown,
  ) {
    super(errorMessage(cause), { cause });
    this.name = "RuntimeCommandsError";
  }
}

/**
 * Commands per connection, slot commands and `add acl`/`add map` alike: ~50–100 bytes each, far
 * below HAProxy's 16 KiB buffer. 2.6 took a line of 3,000 `set server` commands (127 KB) when
 * measured, but with a thousand `add map` commands to a line bench/e2e saw reloads it did not
 * see with 150 (unexplained, so not taken).
 */
const COMMANDS_PER_CONNECTION = 150;

/**
 * How long a slot about to be re-addressed and readied may keep requests in flight on its
 * previous address. HAProxy 2.6 reuses a server's connections by server, not by address: one
 * still in use when the slot gets its new address goes back to the slot's idle pool once its
 * request ends, and the slot's next request may reuse it, reaching the previous pod. An address
 * change purges the slot's idle connections (2.6.12, tested), so a slot whose connections are
 * all idle is safe to re-address. Waiting costs nothing in capacity: the slot is already out of
 * service, and a moving endpoint is carried by a spare meanwhile. Past this, the change goes by
 * reload, which starts every connection afresh.
 */
export const SLOT_QUIET_TIMEOUT_MS = 10_000;

export interface RuntimeCommandOptions extends CliOptions {
  /** SLOT_QUIET_TIMEOUT_MS unless given. */
  quietTimeoutMs?: number;
}

/**
 * Planned slot commands (core/haproxy-config/runtime-plan.ts) in their order, on the lines runtimeLines makes of
 * them (at most COMMANDS_PER_CONNECTION to a connection): one round trip per line, not one per
 * command. A line's commands run one after another in one pass of the CLI. The CLI does not stop
 * at a refused command, so every answer is read, and the next line goes only when all of them
 * took effect; a failure reports how many did (the caller then reloads the file, which sets
 * every slot). A line that re-addresses a slot the plan then readies goes only once that slot
 * has no connection in use (SLOT_QUIET_TIMEOUT_MS). Every name, address and port is checked
 * first: nothing is sent when one is wrong.
 */
export async function runRuntimeCommands(
  socketPath: string,
  commands: readonly RuntimeCommand[],
  opts: RuntimeCommandOptions = {},
): Promise<void> {
  const lines = runtimeLines(commands).map((line) => line.map((c) => ({ c, text: checkedCommandText(c) })));
  const readied = slotsReadiedAfter(commands);
  let done = 0;
  const parts = lines.flatMap((line) =>
    Array.from({ length: Math.ceil(line.length / COMMANDS_PER_CONNECTION) }, (_, i) =>
      line.slice(i * COMMANDS_PER_CONNECTION, (i + 1) * COMMANDS_PER_CONNECTION),
    ),
  );
  for (const part of parts) {
    const readdressed = part.filter((x) => x.c.op === "addr" && readied.has(x.c)).map((x) => x.c);
    try {
      await untilQuiet(socketPath, readdressed, opts);
    } catch (err) {
      throw new RuntimeCommandsError(done, false, err);
    }
    const texts = part.map((x) => x.text);
    let answers: string[] | null;
    try {
      answers = splitAnswers(await cliExchange(socketPath, texts, opts), part.length);
    } catch (err) {
      // Refused or missing, the socket took no command; any other failure may come after some ran.
      const unsent = ["ENOENT", "ECONNREFUSED"].includes((err as NodeJS.ErrnoException).code ?? "");
      throw new RuntimeCommandsError(done, !unsent, err);
    }
    if (answers === null)
      throw new RuntimeCommandsError(
        done,
        true,
        new Error(`HAProxy runtime API: not ${part.length} answers to "${texts[0]}" and the rest of its line`),
      );
    let failed: RuntimeApiError | undefined;
    for (const [i, answer] of answers.entries()) {
      if (tookEffect(part[i]!.c, answer)) done++;
      else failed ??= new RuntimeApiError(texts[i]!, answer === "" ? "(no answer)" : answer);
    }
    if (failed) throw new RuntimeCommandsError(done, false, failed);
  }
}

/** The `addr` commands whose slot a later command of the plan puts in service. */
function slotsReadiedAfter(commands: readonly RuntimeCommand[]): Set<RuntimeCommand> {
  const out = new Set<RuntimeCommand>();
  const readyLater = new Set<string>();
  for (let i = commands.length - 1; i >= 0; i--) {
    const c = commands[i]!;
    const slot = `${c.backend}/${c.server}`;
    if (c.op === "state" && c.state === "ready") readyLater.add(slot);
    else if (c.op === "addr" && readyLater.has(slot)) out.add(c);
  }
  return out;
}

/** Waits until none of the slots has a connection in use; throws once the wait is over. */
async function untilQuiet(
  socketPath: string,
  slots: readonly RuntimeCommand[],
  opts: RuntimeCommandOptions,
): Promise<void> {
  if (slots.length === 0) return;
  const timeoutMs = opts.quietTimeoutMs ?? SLOT_QUIET_TIMEOUT_MS;
  const deadline = performance.now() + timeoutMs;
  const backends = [...new Set(slots.map((c) => c.backend))];
  for (;;) {
    const inUse = new Map<string, number>();
    for (const backend of backends)
      for (const [slot, n] of await connectionsInUse(socketPath, backend, opts)) inUse.set(slot, n);
    const busy = slots.find((c) => (inUse.get(`${c.backend}/${c.server}`) ?? 0) > 0);
    if (!busy) return;
    if (performance.now() >= deadline)
      throw new Error(
        `${busy.backend}/${busy.server} still has ${inUse.get(`${busy.backend}/${busy.server}`)} connection(s) in use to its previous address after ${timeoutMs} ms; re-addressed now, a keep-alive client could reach the previous pod`,
      );
    await sleep(25);
  }
}

/** `used_cur` of each server of a backend, by `backend/server`, from `show servers conn`. */
export async function connectionsInUse(
  socketPath: string,
  backend: string,
  opts?: CliOptions,
): Promise<Map<string, number>> {
  checkName("backend", backend);
  const cmd = `show servers conn ${backend}`;
  const [header, ...rows] = (await runtimeCommand(socketPath, cmd, opts)).split("\n");
  const column = header?.startsWith("# ") ? header.slice(2).split(" ").indexOf("used_cur") : -1;
  if (column < 0) throw new RuntimeApiError(cmd, header ?? "");
  const out = new Map<string, number>();
  for (const row of rows) {
    const fields = row.split(" ");
    const n = Number(fields[column]);
    if (row !== "" && Number.isInteger(n)) out.set(fields[0]!, n);
  }
  return out;
}

/**
 * The answers of a line of commands, one per command, or null when there are not `n`: the 2.6
 * CLI ends each answer with an empty line, so an empty answer is an empty line alone.
 */
export function splitAnswers(output: string, n: number): string[] | null {
  const lines = output.split("\n");
  if (lines.pop() !== "") return null;
  const answers: string[] = [];
  let current: string[] = [];
  for (const line of lines) {
    if (line !== "") current.push(line);
    else {
      answers.push(current.join("\n"));
      current = [];
    }
  }
  return current.length === 0 && answers.length === n ? answers : null;
}

/**
 * Replaces the lines of a pattern file or route map HAProxy loaded (`acl … -f <path>`,
 * `map_str(<path>)`) atomically: a new version is prepared beside the live one (`prepare
 * acl|map`), filled (`add acl|map @<ver>`, one entry per command: 2.6 takes no payload for
 * these), read back and compared, and only then committed. Traffic sees the old lines until the
 * commit and the whole new set after it, never a part; a map keeps the order it was filled in,
 * which `map_end` lookups depend on. A failure before the commit leaves the live lines as they
 * were (the abandoned version is purged by the next commit). Every path and line is checked
 * again here: nothing unvalidated is sent.
 */
export async function swapPatternFile(socketPath: string, file: PatternFile, opts?: CliOptions): Promise<void> {
  if (!isPatternFilePath(file.path)) throw new Error(`not a pattern file path: ${JSON.stringify(file.path)}`);
  for (const e of file.entries) {
    const bad = patternLineError(file.path, e);
    if (bad !== null) throw new Error(`not a line of ${file.path}: ${bad}`);
  }
  const kind = patternFileKind(file.path);
  const prepare = `prepare ${kind} ${file.path}`;
  const prepared = await runtimeCommand(socketPath, prepare, opts);
  const version = /^New version created: (\d+)$/.exec(prepared)?.[1];
  if (version === undefined) throw new RuntimeApiError(prepare, prepared);
  for (let i = 0; i < file.entries.length; i += COMMANDS_PER_CONNECTION) {
    const adds = file.entries
      .slice(i, i + COMMANDS_PER_CONNECTION)
      .map((e) => `add ${kind} @${version} ${file.path} ${e}`);
    // Each `add` answers an empty line when it succeeds.
    const answer = await cliBatch(socketPath, adds, opts);
    if (answer.trim() !== "") throw new RuntimeApiError(adds[0]!, answer.trim());
  }
  const show = `show ${kind} @${version} ${file.path}`;
  const listed = (await runtimeCommand(socketPath, show, opts))
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => /^0x[0-9a-f]+ (.+)$/.exec(l)?.[1] ?? `?${l}`);
  // A map in order (the order it was filled in is the order it matches in); a list as a set.
  const want = new Set(file.entries);
  const differs = kind === "map" ? listed.some((e, i) => e !== file.entries[i]) : listed.some((e) => !want.has(e));
  if (listed.length !== file.entries.length || differs)
    throw new RuntimeApiError(
      show,
      `version ${version} holds ${listed.length} entries, not the ${file.entries.length} sent`,
    );
  const commit = `commit ${kind} @${version} ${file.path}`;
  const committed = await runtimeCommand(socketPath, commit, opts);
  if (committed !== "") throw new RuntimeApiError(commit, committed);
}

/**
 * `show servers state`, verbatim plus a final newline: the format `server-state-file` loads,
 * so the agent can save it before a reload and keep runtime changes and health states.
 */
export async function showServersState(socketPath: string, opts?: CliOptions): Promise<string> {
  const cmd = "show servers state";
  const answer = await runtimeCommand(socketPath, cmd, opts);
  // The dump starts with its format version line ("1").
  if (!/^\d+\n#/.test(answer)) throw new RuntimeApiError(cmd, answer);
  return `${answer}\n`;
}

/** One `show stat` row keyed by the CSV header (pxname, svname, status, addr, scur, ...). */
export type StatRow = Record<string, string>;

// show stat quotes a field only when it holds a comma or a quote (csv_enc).
function splitCsv(line: string): string[] {
  const fields: string[] = [];
  let cur = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      fields.push(cur);
      cur = "";
    } else cur += c;
  }
  fields.push(cur);
  return fields;
}

export async function showStat(socketPath: string, opts?: CliOptions): Promise<StatRow[]> {
  const cmd = "show stat";
  const answer = await runtimeCommand(socketPath, cmd, opts);
  const [header, ...lines] = answer.split("\n");
  if (!header?.startsWith("# ")) throw new RuntimeApiError(cmd, answer);
  const names = splitCsv(header.slice(2));
  return lines
    .filter((l) => l !== "")
    .map((l) => {
      const values = splitCsv(l);
      return Object.fromEntries(names.map((n, i) => [n, values[i] ?? ""]).filter(([n]) => n !== ""));
    });
}
