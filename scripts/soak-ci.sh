#!/usr/bin/env bash
# CI's soak leg (docs/reliability.md, "Soak"): a 2-minute `npm run soak` with every fault kind,
# bounded by a hard timeout (the soak stops its own children by pid on SIGTERM). Needs the built
# dist/ and addon (`npm ci` builds both). Exits with the soak's status: 1 on a lost request, an
# unexplained failure, a proxy crash, a leak or a fault not survived.
set -euo pipefail
cd "$(dirname "$0")/.."
timeout --signal=TERM --kill-after=30 360 node scripts/soak.mjs --duration 120 --json bench/out/soak-ci.json
