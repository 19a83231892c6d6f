/*
 * The process of `npm start` (dist/dev/shared/dev/main.js, from the development build): the
 * local stack, with stage timing when SERVICELB_TRACE_FILE is set.
 */

import { tracerFromEnv } from "../adapters/stage-trace.js";
import { localCli } from "./local-cli.js";

process.exitCode = await localCli(process.argv, { tracer: tracerFromEnv(process.env) });
