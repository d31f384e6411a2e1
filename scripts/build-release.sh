#!/usr/bin/env bash
# Builds the release binary with the Swift runtime linked statically and installs it with its
# resource bundles (the console and the client library) into OUT/bin — what docker/Dockerfile
# copies into its runtime image, and what CI builds and starts (scripts/docker-check.sh).
#
#   scripts/build-release.sh OUT
#
# ROOMCAST_RELEASE_SCRATCH names another build directory than .build (CI builds there while the
# debug build's directory is in use: SwiftPM locks a build directory for each build).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/build-release.sh OUT}
scratch=()
if [ -n "${ROOMCAST_RELEASE_SCRATCH:-}" ]; then scratch=(--scratch-path "$ROOMCAST_RELEASE_SCRATCH"); fi
swift build -c release --static-swift-stdlib --product roomcast "${scratch[@]}"
bin=$(swift build -c release --static-swift-stdlib --show-bin-path "${scratch[@]}")
mkdir -p "$out/bin"
cp "$bin/roomcast" "$out/bin/"
for bundle in "$bin"/*.resources; do
  [ -d "$bundle" ] || continue
  rm -rf "$out/bin/$(basename "$bundle")"
  cp -R "$bundle" "$out/bin/"
done
echo "installed $out/bin/roomcast"
