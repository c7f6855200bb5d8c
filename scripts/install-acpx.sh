#!/usr/bin/env bash
# Install the pinned acpx release (the Node ACP command line used as a benchmark anchor) into
# .tools/acpx and print the path of its `acpx` executable (see install-npm-tool.sh).
#
# Keep the version in sync with benchmarks/_programs.py.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/install-npm-tool.sh" acpx acpx 0.1.15 acpx
