#!/usr/bin/env bash
# Builds the release binary with the Swift runtime linked statically and installs it with its
# resource bundles (the console and the client library) into OUT/bin — what docker/Dockerfile
# copies into its runtime image, and what CI builds and starts (scripts/docker-check.sh).
#
#   scripts/build-release.sh OUT
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/build-release.sh OUT}
swift build -c release --static-swift-stdlib --product roomcast
bin=$(swift build -c release --static-swift-stdlib --show-bin-path)
mkdir -p "$out/bin"
cp "$bin/roomcast" "$out/bin/"
for bundle in "$bin"/*.resources; do
  [ -d "$bundle" ] || continue
  rm -rf "$out/bin/$(basename "$bundle")"
  cp -R "$bundle" "$out/bin/"
done
echo "installed $out/bin/roomcast"
