/*
 * The local stack's object store: s3rver's own command line (its flags, its output), with its
 * objects replaced whole on every PUT as S3 replaces them (s3rver-atomic.ts).
 */

import { createRequire } from "node:module";
import { makeS3rverWritesAtomic } from "./s3rver-atomic.js";

makeS3rverWritesAtomic();
createRequire(import.meta.url)("s3rver/bin/s3rver.js");
