#!/usr/bin/env bash
# CI's soak leg (docs/reliability.md, "Soak"): a 4-minute `npm run soak` with every fault kind,
# bounded by a hard timeout (the soak stops its own children by pid on SIGTERM). Needs the built
# dist/ and addon (`npm ci` builds both). Exits with the soak's status: 1 on a lost request, an
# unexplained failure, a proxy crash, a leak or a fault not survived.
# Four minutes, not two: the proxy's RSS grows for its first ~150 s under this load (V8's heaps of
# both threads and the allocator's arenas reaching their working size, the router's index filling),
# so the last half of a 2-minute run, which the rise bound judges, was still warm-up (a rise of 32.4
# MiB against the 32 MiB bound on 2026-12-05, where a 10-minute run rose 7.4).
set -euo pipefail
cd "$(dirname "$0")/.."
timeout --signal=TERM --kill-after=30 480 node scripts/soak.mjs --duration 240 --json bench/out/soak-ci.json
