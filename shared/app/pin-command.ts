/*
 * `servicelb pin <key|latest~N>` and `servicelb unpin`: the incident lever
 * (docs/design.md#invariant-6-history). A pin is one object in the store (pin.json); every agent
 * reads it on each pull and runs the pinned config until it is removed, older or newer than what
 * it runs. Reconcile passes go on publishing meanwhile, so history keeps growing and unpinning
 * moves the fleet to the newest.
 */

import { OptionsError } from "../core/settings/settings.js";
import { resolveConfigRef, withStore } from "./history-command.js";
import { errorMessage } from "../core/error-message.js";

export async function runPin(ref: string, flags: Record<string, unknown>): Promise<number> {
  return withStore(flags, async (store) => {
    const key = resolveConfigRef(ref, await store.history());
    // The whole object, verified: pinning a config no agent could take would pin nothing.
    const config = await store.get(key).catch((err: unknown) => {
      throw new OptionsError(`${key} cannot be pinned: ${errorMessage(err)}`);
    });
    const reason = typeof flags.reason === "string" ? flags.reason : undefined;
    await store.putPin({
      key,
      sha256: config.sha256,
      pinnedAt: new Date().toISOString(),
      ...(reason ? { reason } : {}),
    });
    process.stdout.write(`pinned ${key}: every agent runs it until \`servicelb unpin\`; passes still publish\n`);
    return 0;
  });
}

export async function runUnpin(flags: Record<string, unknown>): Promise<number> {
  return withStore(flags, async (store) => {
    const pin = await store.getPin().catch(() => null);
    await store.deletePin();
    const newest = await store.latest();
    process.stdout.write(
      `${pin ? `unpinned ${pin.key}` : "nothing was pinned"}: agents follow the newest config${newest ? ` (${newest.key})` : ""}\n`,
    );
    return 0;
  });
}
