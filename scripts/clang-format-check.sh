#!/usr/bin/env bash
# Checks the C++ sources against .clang-format (npm run lint). Needs clang-format
# (Debian: apt-get install clang-format; .ci/run installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "clang-format is not installed (apt-get install clang-format)" >&2
  exit 1
fi
find native \( -name '*.h' -o -name '*.cc' \) -print0 | xargs -0 clang-format --dry-run --Werror
