#!/usr/bin/env bash
# Install the pinned acpx release (the Node ACP command line used as a benchmark anchor) into the
# repo-local prefix .tools/acpx and print the path of its `acpx` executable on stdout (everything
# else goes to stderr).
#
# Idempotent: when the pinned version is already installed it only prints the path.  A fresh install
# goes to a temporary directory that replaces .tools/acpx only once `acpx --version` has run, so an
# interrupted install never leaves a half-populated prefix behind.  Concurrent runs are serialised
# with flock.  Install scripts are skipped (--ignore-scripts): acpx and its dependencies are plain
# JavaScript.
#
# Keep ACPX_VERSION in sync with benchmarks/_common.py.
set -euo pipefail

ACPX_VERSION="0.1.15"
PACKAGE="acpx"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
tools_dir="${repo_root}/.tools"
prefix="${tools_dir}/acpx"
exe="${prefix}/node_modules/.bin/acpx"
marker="${prefix}/.installed-${ACPX_VERSION}"

log() { printf 'install-acpx: %s\n' "$*" >&2; }

installed_version() {
    # Reads the installed package.json without starting the CLI.
    local pkg="${1}/node_modules/${PACKAGE}/package.json"
    [[ -f "${pkg}" ]] || return 1
    node -e 'process.stdout.write(String(require(process.argv[1]).version))' "${pkg}"
}

is_installed() {
    [[ -f "${marker}" && -x "${exe}" ]] && [[ "$(installed_version "${prefix}" 2>/dev/null)" == "${ACPX_VERSION}" ]]
}

for tool in node npm; do
    command -v "${tool}" >/dev/null 2>&1 || { log "${tool} not found on PATH"; exit 1; }
done
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if (( node_major < 18 )); then
    log "node >= 18 required, found $(node --version)"
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

exec 9> "${tools_dir}/.install-acpx.lock"
flock 9
if is_installed; then  # another run finished while we waited
    printf '%s\n' "${exe}"
    exit 0
fi

staging="$(mktemp -d "${tools_dir}/acpx.staging.XXXXXX")"
chmod 755 "${staging}"
trap 'rm -rf "${staging}"' EXIT

log "installing ${PACKAGE}@${ACPX_VERSION} into ${prefix} (node $(node --version), npm $(npm --version))"
printf '{\n  "name": "remote-acp-tools-acpx",\n  "private": true\n}\n' > "${staging}/package.json"
npm install \
    --prefix "${staging}" \
    --save-exact \
    --no-audit \
    --no-fund \
    --no-update-notifier \
    --ignore-scripts \
    --loglevel=warn \
    "${PACKAGE}@${ACPX_VERSION}" >&2

staged_exe="${staging}/node_modules/.bin/acpx"
got="$(installed_version "${staging}")"
if [[ "${got}" != "${ACPX_VERSION}" ]]; then
    log "npm installed version '${got}', expected ${ACPX_VERSION}"
    exit 1
fi
# The CLI itself must start on this node.
HOME="${staging}/home" "${staged_exe}" --version >/dev/null 2>&1 || {
    log "'acpx --version' failed on node $(node --version)"
    exit 1
}
rm -rf "${staging}/home"
touch "${staging}/.installed-${ACPX_VERSION}"

rm -rf "${prefix}"
mv "${staging}" "${prefix}"
trap - EXIT
log "installed acpx ${ACPX_VERSION}"
printf '%s\n' "${exe}"
