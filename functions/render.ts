import * as functions from "@google-cloud/functions-framework";
import { answerFrameworkRejections, answerJson } from "../shared/adapters/framework-rejections.js";
import { createLogger } from "../shared/adapters/log.js";
import { loadFunctionSettings } from "../shared/app/function-options.js";
import { createRenderHandler } from "../shared/app/render-http.js";

/** HTTP function `render`: the manual dry run. Bad settings stop the instance at start. */
functions.http("render", createRenderHandler(loadFunctionSettings(), createLogger("render")));
// Bodies the framework cannot parse get the same JSON error as every other bad request.
answerFrameworkRejections(answerJson);
