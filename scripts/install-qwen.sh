#!/usr/bin/env bash
# Install the pinned qwen-code release into the repo-local prefix .tools/qwen and print the path of
# its `qwen` executable on stdout (everything else goes to stderr).
#
# Idempotent: when the pinned version is already installed it only prints the path.  A fresh install
# goes to a temporary directory that replaces .tools/qwen only once `qwen --version` has run, so an
# interrupted install never leaves a half-populated prefix behind.  Concurrent runs are serialised
# with flock.
#
# qwen-code 0.24.4 declares engines.node >=22; on node 20 npm prints an EBADENGINE warning, but the
# CLI and its ACP mode work.  Install scripts are skipped (--ignore-scripts): only the optional
# native add-ons (audio capture, node-pty builds) have them, and ACP needs none of them.
#
# Keep QWEN_VERSION in sync with tests/support/qwen.py.
set -euo pipefail

QWEN_VERSION="0.24.4"
PACKAGE="@qwen-code/qwen-code"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
tools_dir="${repo_root}/.tools"
prefix="${tools_dir}/qwen"
exe="${prefix}/node_modules/.bin/qwen"
marker="${prefix}/.installed-${QWEN_VERSION}"

log() { printf 'install-qwen: %s\n' "$*" >&2; }

installed_version() {
    # Reads the installed package.json without starting the CLI.
    local pkg="${1}/node_modules/${PACKAGE}/package.json"
    [[ -f "${pkg}" ]] || return 1
    node -e 'process.stdout.write(String(require(process.argv[1]).version))' "${pkg}"
}

is_installed() {
    [[ -f "${marker}" && -x "${exe}" ]] && [[ "$(installed_version "${prefix}" 2>/dev/null)" == "${QWEN_VERSION}" ]]
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

exec 9> "${tools_dir}/.install-qwen.lock"
flock 9
if is_installed; then  # another run finished while we waited
    printf '%s\n' "${exe}"
    exit 0
fi

staging="$(mktemp -d "${tools_dir}/qwen.staging.XXXXXX")"
chmod 755 "${staging}"
trap 'rm -rf "${staging}"' EXIT

log "installing ${PACKAGE}@${QWEN_VERSION} into ${prefix} (node $(node --version), npm $(npm --version))"
printf '{\n  "name": "remote-acp-tools-qwen",\n  "private": true\n}\n' > "${staging}/package.json"
npm install \
    --prefix "${staging}" \
    --save-exact \
    --no-audit \
    --no-fund \
    --no-update-notifier \
    --ignore-scripts \
    --loglevel=warn \
    "${PACKAGE}@${QWEN_VERSION}" >&2

staged_exe="${staging}/node_modules/.bin/qwen"
got="$(installed_version "${staging}")"
if [[ "${got}" != "${QWEN_VERSION}" ]]; then
    log "npm installed version '${got}', expected ${QWEN_VERSION}"
    exit 1
fi
# The CLI itself must start on this node (engines says >=22; 0.24.4 runs on 20).
ran="$(HOME="${staging}/home" "${staged_exe}" --version 2>/dev/null)" || {
    log "'qwen --version' failed on node $(node --version)"
    exit 1
}
if [[ "${ran}" != "${QWEN_VERSION}" ]]; then
    log "'qwen --version' printed '${ran}', expected ${QWEN_VERSION}"
    exit 1
fi
rm -rf "${staging}/home"
touch "${staging}/.installed-${QWEN_VERSION}"

rm -rf "${prefix}"
mv "${staging}" "${prefix}"
trap - EXIT
log "installed qwen-code ${QWEN_VERSION}"
printf '%s\n' "${exe}"
