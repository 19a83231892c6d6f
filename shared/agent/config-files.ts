import { existsSync } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Logger } from "../adapters/log.js";
import { type ConfigParser, type HaproxyConfig, parseConfig } from "../core/haproxy-config/parse.js";
import { isPatternFilePath, PATTERN_DIRS, patternFileText } from "../core/haproxy-config/pattern-files.js";
import { EMPTY_SERVER_STATE } from "../core/haproxy-config/server-state.js";
import { NotDurableError, readIfExists, writeFileAtomic } from "./files.js";
import { errorMessage } from "../core/error-message.js";

/** The files HAProxy reads on the node: its config, the pattern files beside it, its server-state file. */
export class ConfigFiles {
  /** Pattern files' text as this process last wrote or read it, so an unchanged list costs no write. */
  private readonly patterns = new Map<string, string>();

  constructor(
    private readonly configPath: string,
    private readonly log: Logger,
    private readonly parse: ConfigParser = parseConfig,
  ) {}

  /**
   * haproxy.cfg ← text, atomically, with its pattern files (core/haproxy-config/pattern-files.ts): the files
   * first, so a HAProxy restarted at any moment reads the config's lists or newer ones, never a
   * config without its files; then files no longer named are removed. Replaced but not synced to
   * disk (NotDurableError) counts as written.
   */
  async writeConfig(text: string): Promise<void> {
    const config = this.parsed(text);
    await this.writePatternFiles(config.files);
    await this.durably(this.configPath, text);
    await this.prunePatternFiles(config.files);
  }

  /** The pattern files of `text`, where they differ from what is on disk now (HAProxy is about to start on it). */
  async ensurePatternFiles(text: string): Promise<void> {
    const config = this.parsed(text);
    this.patterns.clear();
    await this.writePatternFiles(config.files);
  }

  private parsed(text: string): HaproxyConfig {
    const config = this.parse(text);
    if ("error" in config) throw new Error(`the config's ${config.error}`);
    return config;
  }

  private async writePatternFiles(files: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const dirs = new Set([...files.keys()].map((path) => dirname(path)));
    for (const dir of dirs) await mkdir(join(dirname(this.configPath), dir), { recursive: true });
    for (const [path, entries] of files) {
      const text = patternFileText(entries);
      const full = join(dirname(this.configPath), path);
      if (!this.patterns.has(path)) {
        const onDisk = await readIfExists(full);
        if (onDisk !== null) this.patterns.set(path, onDisk);
      }
      if (this.patterns.get(path) === text) continue;
      await this.durably(full, text);
      this.patterns.set(path, text);
    }
  }

  /** Only names a config could give: anything else in the directory is not ours to remove. */
  private async prunePatternFiles(keep: ReadonlyMap<string, readonly string[]>): Promise<void> {
    for (const sub of PATTERN_DIRS) {
      const dir = join(dirname(this.configPath), sub);
      const names = await readdir(dir).catch(() => [] as string[]);
      for (const name of names) {
        const path = `${sub}/${name}`;
        if (keep.has(path) || !isPatternFilePath(path)) continue;
        this.patterns.delete(path);
        await rm(join(dir, name), { force: true }).catch((err: unknown) =>
          this.log.warn({ path, err: errorMessage(err) }, "cannot remove a pattern file"),
        );
      }
    }
  }

  private async durably(path: string, text: string): Promise<void> {
    try {
      await writeFileAtomic(path, text);
    } catch (err) {
      if (!(err instanceof NotDurableError)) throw err;
      this.log.warn({ path, err: err.message }, "a config file was replaced but may not survive a power loss");
    }
  }

  /** HAProxy (and `haproxy -c`) warn about a missing server-state file; an empty one says "no saved state". */
  async ensureServerStateFile(text: string): Promise<void> {
    const config = this.parse(text);
    const path = "error" in config ? undefined : config.serverStateFile;
    if (path && !existsSync(path)) await this.writeServerState(path, EMPTY_SERVER_STATE);
  }

  /** Never throws: a missing state costs health states across a reload, not the reload. */
  async writeServerState(path: string, text: string): Promise<void> {
    try {
      await mkdir(dirname(path), { recursive: true });
      await writeFileAtomic(path, text);
    } catch (err) {
      this.log.warn({ path, err: errorMessage(err) }, "cannot write the server-state file");
    }
  }
}
