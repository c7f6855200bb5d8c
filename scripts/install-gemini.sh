#!/usr/bin/env bash
# Install the pinned gemini-cli release into the repo-local prefix .tools/gemini and print the path of
# its `gemini` executable on stdout (everything else goes to stderr).
#
# Idempotent: when the pinned version is already installed it only prints the path.  A fresh install
# goes to a temporary directory that replaces .tools/gemini only once `gemini --version` has run, so
# an interrupted install never leaves a half-populated prefix behind.  Concurrent runs are serialised
# with flock.
#
# Install scripts are skipped (--ignore-scripts): only optional native add-ons have them, and ACP
# mode needs none of them.  The tests run it offline against a local mock of the Gemini API
# (tests/support/gemini_mock.py).
#
# Keep GEMINI_VERSION in sync with tests/support/gemini.py.
set -euo pipefail

GEMINI_VERSION="0.61.0"
PACKAGE="@google/gemini-cli"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
tools_dir="${repo_root}/.tools"
prefix="${tools_dir}/gemini"
exe="${prefix}/node_modules/.bin/gemini"
marker="${prefix}/.installed-${GEMINI_VERSION}"

log() { printf 'install-gemini: %s\n' "$*" >&2; }

installed_version() {
    # Reads the installed package.json without starting the CLI.
    local pkg="${1}/node_modules/${PACKAGE}/package.json"
    [[ -f "${pkg}" ]] || return 1
    node -e 'process.stdout.write(String(require(process.argv[1]).version))' "${pkg}"
}

is_installed() {
    [[ -f "${marker}" && -x "${exe}" ]] && [[ "$(installed_version "${prefix}" 2>/dev/null)" == "${GEMINI_VERSION}" ]]
}

for tool in node npm; do
    command -v "${tool}" >/dev/null 2>&1 || { log "${tool} not found on PATH"; exit 1; }
done
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if (( node_major < 20 )); then
    log "node >= 20 required, found $(node --version)"
    exit 1
fi

# Fast path, without taking the lock.
if is_installed; then
    printf '%s\n' "${exe}"
    exit 0
fi

mkdir -p "${tools_dir}"
# .tools/ holds downloaded tooling only; keep it out of git even without a top-level .gitignore entry.
[[ -f "${tools_dir}/.gitignore" ]] || printf '*\n' > "${tools_dir}/.gitignore"

exec 9> "${tools_dir}/.install-gemini.lock"
flock 9
if is_installed; then  # another run finished while we waited
    printf '%s\n' "${exe}"
    exit 0
fi

staging="$(mktemp -d "${tools_dir}/gemini.staging.XXXXXX")"
chmod 755 "${staging}"
trap 'rm -rf "${staging}"' EXIT

log "installing ${PACKAGE}@${GEMINI_VERSION} into ${prefix} (node $(node --version), npm $(npm --version))"
printf '{\n  "name": "remote-acp-tools-gemini",\n  "private": true\n}\n' > "${staging}/package.json"
npm install \
    --prefix "${staging}" \
    --save-exact \
    --no-audit \
    --no-fund \
    --no-update-notifier \
    --ignore-scripts \
    --loglevel=warn \
    "${PACKAGE}@${GEMINI_VERSION}" >&2

staged_exe="${staging}/node_modules/.bin/gemini"
got="$(installed_version "${staging}")"
if [[ "${got}" != "${GEMINI_VERSION}" ]]; then
    log "npm installed version '${got}', expected ${GEMINI_VERSION}"
    exit 1
fi
# The CLI itself must start on this node (engines says >=22; 0.61.0 runs on 20).
ran="$(HOME="${staging}/home" "${staged_exe}" --version 2>/dev/null)" || {
    log "'gemini --version' failed on node $(node --version)"
    exit 1
}
if [[ "${ran}" != "${GEMINI_VERSION}" ]]; then
    log "'gemini --version' printed '${ran}', expected ${GEMINI_VERSION}"
    exit 1
fi
rm -rf "${staging}/home"
touch "${staging}/.installed-${GEMINI_VERSION}"

rm -rf "${prefix}"
mv "${staging}" "${prefix}"
trap - EXIT
log "installed gemini-cli ${GEMINI_VERSION}"
printf '%s\n' "${exe}"
