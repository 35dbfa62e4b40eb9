#!/usr/bin/env bash
# Builds the release preset and runs the main job: `flashindexer run` (extra args pass through).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target flashindexer_cli
exec build/release/flashindexer run "$@"
