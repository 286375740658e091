#!/usr/bin/env bash
# What `make test` and `make test-all` need from the system before any test runs: Java 17 or 21 (Kafka, Spark), PostgreSQL's server
# binaries (the integration tests start their own server), Chromium (the browser tests) and Python's venv module.
# As root on Debian or Ubuntu it installs what is missing with apt-get; otherwise it prints the one command to run
# and exits 2. It never waits for input.
set -uo pipefail

PYTHON="${PYTHON:-python3}"
need=()
java -version 2>&1 | grep -qE 'version "(17|21)[."]' || need+=(openjdk-17-jdk-headless)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || need+=(chromium)
# Debian splits ensurepip out of python3: without python3-venv, `python3 -m venv` fails half way.
[ -x .venv/bin/python ] || "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)

((${#need[@]})) || exit 0

if command -v apt-get >/dev/null 2>&1; then
  cmd="apt-get install -y --no-install-recommends ${need[*]}"
  if [ "$(id -u)" = 0 ]; then
    echo "tests: installing the system packages it needs: ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
      && exit 0
    echo "tests: the install failed; run it yourself: $cmd" >&2
    exit 2
  fi
  echo "the tests need ${need[*]}; install them, then run the make target again: sudo apt-get update && sudo $cmd" >&2
else
  echo "the tests need ${need[*]} (Debian package names); install them with your system's package manager" \
       "(macOS: brew install openjdk@17 postgresql@16 chromium), then run the make target again" >&2
fi
exit 2
