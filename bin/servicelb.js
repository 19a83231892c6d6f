#!/usr/bin/env node
// Compiled by `npm run build` (npm ci runs it through the prepare script).
import "../dist/functions/cli.js";
