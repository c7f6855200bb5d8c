#!/usr/bin/env bash
# Install the pinned qwen-code release into .tools/qwen and print the path of its `qwen` executable
# (see install-npm-tool.sh). qwen-code 0.24.4 declares engines.node >=22; on node 20 npm prints an
# EBADENGINE warning, but the CLI and its ACP mode work.
#
# Keep the version in sync with tests/support/qwen.py.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/install-npm-tool.sh" qwen @qwen-code/qwen-code 0.24.4 qwen --version-is-exact
