/*
 * The stage trace of an agent (adapters/stage-trace.ts; bench/e2e, bench/scale and bench/fleet
 * read it) as decorators the composition root wraps around the agent's stages
 * (agent/pull-stages.ts): the pull loop and its apply steps know nothing of tracing.
 *
 * Events, each with the config's key where there is one: notify (a ping, and whether a pull was
 * under way: `busy`), pull.start, pull.end (`via`: ping, list, pin or rollout), take.stale (older
 * than what runs), check.done (`haproxy -c` passed), runtime.done (`changes`: slots, `files`:
 * pattern files), start.end, reload.start and reload.end (`why: "undo"` for the file's own config
 * put back), applied (`how`).
 */

import type { StageTrace } from "../adapters/stage-trace.js";
import type { ApplyStages, PullStages, StageDecorators } from "../agent/pull-stages.js";

export function traceAgent(trace: StageTrace): StageDecorators {
  return { pull: (stages) => tracePull(stages, trace), apply: (stages) => traceApply(stages, trace) };
}

function tracePull(stages: PullStages, trace: StageTrace): PullStages {
  return {
    ...stages,
    notify(key, sha256) {
      trace("notify", { key, busy: stages.busy() });
      return stages.notify(key, sha256);
    },
    pull() {
      trace("pull.start");
      return stages.pull();
    },
    async take(config, via, runningDistrusted) {
      trace("pull.end", { key: config.key, via });
      const running = stages.running();
      const outcome = await stages.take(config, via, runningDistrusted);
      if (outcome === "stale") trace("take.stale", { key: config.key, running });
      return outcome;
    },
  };
}

function traceApply(stages: ApplyStages, trace: StageTrace): ApplyStages {
  return {
    async check(config) {
      const checked = await stages.check(config);
      if (checked.ok) trace("check.done", { key: config.key });
      return checked;
    },
    async runtime(config, decision) {
      await stages.runtime(config, decision);
      trace("runtime.done", { key: config.key, changes: decision.slots, files: decision.files.length });
    },
    async start(key) {
      await stages.start(key);
      trace("start.end", { key });
    },
    async reload(key, why) {
      trace("reload.start", why ? { key, why } : { key });
      const result = await stages.reload(key, why);
      trace("reload.end", { key });
      return result;
    },
    applied(config, how, t0, lastError) {
      trace("applied", { key: config.key, how });
      return stages.applied(config, how, t0, lastError);
    },
  };
}
