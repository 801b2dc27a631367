#!/usr/bin/env bash
# Offline check of the SST app (no AWS account, no deploy):
#   1. installs the SST platform into .sst/platform if it is missing or is for
#      another sst version (`sst install`, from the npm registry);
#   2. type-checks sst.config.ts and infra/*.ts against the real component
#      types (infra/tsconfig.json, with the platform's own TypeScript);
#   3. bundles sst.config.ts with the platform's esbuild, as `sst deploy` does,
#      so an infra import that does not resolve fails here too.
# Exits non-zero on any error. Usage: scripts/check-infra.sh [--platform-only]
set -euo pipefail

cd "$(dirname "$0")/.."
platform=.sst/platform

export SST_SKIP_DEPENDENCY_CHECK=1 SST_NO_BUN=1 SST_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
export SST_STAGE="${SST_STAGE:-test}"

wanted=$(node -p 'require("./node_modules/sst/package.json").version')
installed=$(cat "$platform/version" 2>/dev/null || true)
if [[ ! -x "$platform/node_modules/.bin/tsc" || "$installed" != "$wanted" ]]; then
  echo "check-infra: installing the SST $wanted platform into $platform"
  npx --no-install sst install
fi

# --platform-only: just make sure the platform is there (npm run build needs its types).
[[ "${1:-}" == "--platform-only" ]] && exit 0

echo "check-infra: type-checking sst.config.ts and infra/"
"$platform/node_modules/.bin/tsc" -p infra/tsconfig.json

echo "check-infra: bundling sst.config.ts"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$platform/node_modules/.bin/esbuild" sst.config.ts --bundle --platform=node --format=esm \
  --outfile="$out/sst.config.mjs" --log-level=warning

echo "check-infra: ok"
