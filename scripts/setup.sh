#!/usr/bin/env bash
# Installs what `make test` needs on a Debian machine when it is missing: Go must be
# there; redis-server, MariaDB, PostgreSQL, ZooKeeper and etcd come from Debian's packages.
# Nothing is started here: each test package starts its own servers on free loopback ports.
set -euo pipefail

export PATH="/usr/local/go/bin:$PATH"
if ! command -v go >/dev/null 2>&1; then
  echo "setup: Go is not installed (expected at /usr/local/go)" >&2
  exit 1
fi

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v mariadbd >/dev/null 2>&1 || missing+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || missing+=(mariadb-client)
# PostgreSQL's programs live in /usr/lib/postgresql/<version>/bin, off the PATH.
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql-15)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
[ -f /usr/share/java/slf4j-simple.jar ] || missing+=(libslf4j-java)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
# Curator's recipes, for the ZooKeeper backend's interop test with a Curator process.
[ -f /usr/share/java/curator-recipes.jar ] || missing+=(libcurator-recipes-java)
# javac compiles the interop test's Java program against those jars.
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # Keep the packages' maintainer scripts from starting system-wide servers on the
  # default ports: a policy-rc.d that refuses, created only if none exists.
  policy=/usr/sbin/policy-rc.d
  created_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod +x "$policy"
    created_policy=1
  fi
  trap '[ -n "$created_policy" ] && $sudo rm -f "$policy"' EXIT
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
go version
redis-server --version
mariadbd --version
"$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/postgres" --version
echo "zookeeper: $(readlink -f /usr/share/java/zookeeper.jar)"
echo "etcd: $(etcd --version | head -n 1)"
