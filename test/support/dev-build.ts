import { join } from "node:path";

/**
 * Where `npm run build:dev` (tsconfig.dev.json) puts what does not ship: the local stack, the
 * benchmarks and this folder, compiled beside the production build in dist/.
 */
export const DEV_BUILD = join(import.meta.dirname, "..", "..", "dist", "dev");

/** The process `npm start` runs. */
export const LOCAL_STACK_ENTRY = join(DEV_BUILD, "shared", "dev", "main.js");
