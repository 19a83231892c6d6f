/*
 * `servicelb serve-render`: the `render` HTTP function on a local port, as functions-framework
 * serves it, for a dry run on a workstation. The deployed bundle is loaded: it registers the
 * function with the one functions-framework in node_modules, which it leaves external. The
 * framework's launcher has no way to report a port that is taken (its listen has no error
 * handler: Node's EADDRINUSE stack trace is what an operator sees) and functions-framework 5
 * exports no other way to start its server than
 * `getTestServer`, which builds the launcher's very server (`getServer` with the registered
 * function and its signature type) without listening. So the listen, and its failure, are ours.
 */

import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { getTestServer } from "@google-cloud/functions-framework/testing";
import { OptionsError } from "../core/settings/settings.js";
import { packageRoot } from "../adapters/templates.js";
import { describePortInUse, portHolder } from "../adapters/port-holder.js";
import { errorMessage } from "../core/error-message.js";

export const DEFAULT_SERVE_PORT = 8090;

export async function runServeRender(flags: { port?: string; host?: string }): Promise<number> {
  const port = parsePort(flags.port ?? String(DEFAULT_SERVE_PORT));
  try {
    await import(pathToFileURL(join(packageRoot(), "dist", "bundle", "render.mjs")).href);
  } catch (err) {
    // The bundle has its own copy of the class: bad SERVICELB_* settings are still bad input (exit 2).
    if ((err as Error).name === "OptionsError") throw new OptionsError(errorMessage(err));
    throw err;
  }
  const server = getTestServer("render");
  // As the launcher does: a render of a large cluster may outlast Node's default request timeout.
  server.setTimeout(0);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ port, host: flags.host }, () => resolve());
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code !== "EADDRINUSE") throw err;
    process.stderr.write(`servicelb serve-render: ${describePortInUse(port, "--port", portHolder(port))}\n`);
    return 1;
  }
  const where = flags.host && flags.host !== "0.0.0.0" && flags.host !== "::" ? flags.host : "localhost";
  process.stdout.write(
    `render function: http://${where.includes(":") ? `[${where}]` : where}:${port}/ (POST a snapshot, GET the live cluster, GET /metrics)\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => server.close(() => resolve());
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  return 0;
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < 1 || port > 65535)
    throw new OptionsError(`--port: ${JSON.stringify(text)} is not a port number (1-65535)`);
  return port;
}
