#!/usr/bin/env bash
# Runs every fuzz target of the module for a bounded time each: scripts/fuzz.sh 20s
set -euo pipefail
fuzztime="${1:-20s}"
export PATH="/usr/local/go/bin:$PATH"
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "== $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
