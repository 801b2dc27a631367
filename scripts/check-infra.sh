#!/usr/bin/env bash
# Offline check of this repository's SST app (no AWS account, no deploy): the
# same check an app runs with `npx leasehold check` (cli/infra-check.ts):
#   1. installs the SST platform into .sst/platform if it is missing or is for
#      another sst version (`sst install`, offline where the npm cache allows);
#   2. type-checks sst.config.ts and what it imports (infra/, the config, the
#      jobs) against the real component types, with the platform's TypeScript;
#   3. bundles sst.config.ts with esbuild, as `sst deploy` does, so an infra
#      import that does not resolve fails here too.
# Exits non-zero on any error. Usage: scripts/check-infra.sh [--platform-only]
set -euo pipefail

cd "$(dirname "$0")/.."
exec node cli/bin.mjs check "$@"
