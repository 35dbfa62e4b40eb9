#!/usr/bin/env bash
# Prepares .deps/ (git-ignored) for the GPU machine, which reaches no package
# registry: the Debian packages of CLI11, nlohmann-json and the GoogleTest sources,
# extracted. Run here, then name .deps in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps && mkdir -p .deps/debs
(cd .deps/debs && apt-get download libcli11-dev nlohmann-json3-dev googletest >/dev/null)
for d in .deps/debs/*.deb; do dpkg -x "$d" .deps; done
rm -rf .deps/debs .deps/usr/share/doc
du -sh .deps
