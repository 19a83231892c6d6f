/*
 * `servicelb reconcile --once`: the reconcile function's pass, run once from a shell. Returns the
 * exit code; the result goes to stdout, logs to stderr.
 */

import { createLogger } from "../adapters/log.js";
import { openStore } from "../adapters/open-store.js";
import { loadFunctionSettings, requireStore } from "./function-options.js";
import { withRecordedSettings } from "./recorded-settings.js";
import { createReconciler } from "./reconcile.js";

/**
 * `servicelb reconcile --once`: one full pass from a shell, rendered with the settings recorded
 * with the store's newest config unless flags (variables, a config file) say otherwise; what
 * differs is said on stderr and in the printed result.
 */
export async function runReconcileOnce(flags: Record<string, unknown>): Promise<number> {
  const settings = loadFunctionSettings(process.env, flags);
  const store = openStore(requireStore(settings));
  const recorded = await withRecordedSettings(store, settings, { env: process.env, flags }).catch((err: unknown) => {
    store.close();
    throw err;
  });
  if (recorded.from) {
    const differs = recorded.differs.map(
      (c) => `${c.setting} ${String(c.from ?? "(unset)")} → ${String(c.to ?? "(unset)")}`,
    );
    process.stderr.write(
      `servicelb: rendering with the settings recorded with ${recorded.from.key} (settings ${recorded.from.digest})` +
        (differs.length > 0 ? `, except: ${differs.join(", ")}\n` : "\n"),
    );
  } else {
    process.stderr.write(
      "servicelb: the store records no settings: rendering with this shell's settings (flags, SERVICELB_*, defaults)\n",
    );
  }
  const reconciler = createReconciler(
    { ...settings, options: recorded.options },
    { log: createLogger("reconcile"), store },
  );
  try {
    const result = await reconciler.reconcileNow({
      id: `cli-${process.pid}-${Date.now()}`,
      type: "servicelb.cli.reconcile",
    });
    process.stdout.write(
      `${JSON.stringify({ ...result, settings: { recordedWith: recorded.from?.key ?? null, differs: recorded.differs } }, null, 2)}\n`,
    );
    return 0;
  } finally {
    await reconciler.close();
  }
}
