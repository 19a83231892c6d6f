#!/usr/bin/env node
// Built by `npm run build` (npm ci runs it through the prepare script): the CLI bundled in chunks,
// one per command (rolldown.config.mjs).
import "../dist/bundle/cli/cli.js";
