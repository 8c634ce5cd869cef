#!/usr/bin/env bash
# Installs what the test suite and benchmarks need from the OS when it is missing:
# redis-server / redis-cli / redis-benchmark (differential tests, benchmarks), a Java 17+
# runtime (Spark) and chromium (the status page's browser test, driven by Playwright: its own
# browser download is not used). Installing needs root and the Debian package mirror; without them the
# tests that need these tools skip and say why.
set -u
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
java_ok=0
if command -v java >/dev/null 2>&1; then
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  [ -n "$v" ] && [ "$v" -ge 17 ] && java_ok=1
fi
[ "$java_ok" = 1 ] || need+=(openjdk-17-jre-headless)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-tools: missing ${need[*]} and cannot install (needs root and apt-get); the tests that need them will skip" >&2
  exit 0
fi
echo "ensure-tools: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
# one package at a time: a package that cannot be installed (say chromium's large download)
# must not keep the others (redis-server for the differential tests) from being installed
for pkg in "${need[@]}"; do
  apt-get install -y -qq "$pkg" >/dev/null 2>&1 || echo "ensure-tools: apt-get install $pkg failed; the tests that need it will skip" >&2
done
exit 0
