#!/usr/bin/env bash
# Install the pinned gemini-cli release into .tools/gemini and print the path of its `gemini`
# executable (see install-npm-tool.sh). The tests run it offline against a local mock of the
# Gemini API (tests/support/gemini_mock.py).
#
# Keep the version in sync with tests/support/gemini.py.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/install-npm-tool.sh" gemini @google/gemini-cli 0.61.0 gemini --version-is-exact
