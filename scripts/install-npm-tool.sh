#!/usr/bin/env bash
# Install one pinned npm package into the repo-local prefix .tools/NAME and print the path of its
# executable BIN on stdout (everything else goes to stderr):
#
#     scripts/install-npm-tool.sh NAME PACKAGE VERSION BIN [--version-is-exact]
#
# Idempotent: when the pinned version is already installed it only prints the path.  A fresh
# install goes to a temporary directory that replaces .tools/NAME only once `BIN --version` has
# run on this node, so an interrupted install never leaves a half-populated prefix behind.
# Concurrent runs are serialised with flock.  Install scripts are skipped (--ignore-scripts): the
# tools installed this way need none in the modes we run them in (only optional native add-ons
# have them).  With --version-is-exact, `BIN --version` must print VERSION itself.
set -euo pipefail

if [[ $# -lt 4 ]]; then
    printf 'usage: %s NAME PACKAGE VERSION BIN [--version-is-exact]\n' "$0" >&2
    exit 2
fi
NAME="$1" PACKAGE="$2" VERSION="$3" BIN="$4" EXACT="${5:-}"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
tools_dir="${repo_root}/.tools"
prefix="${tools_dir}/${NAME}"
exe="${prefix}/node_modules/.bin/${BIN}"
marker="${prefix}/.installed-${VERSION}"

log() { printf 'install-%s: %s\n' "${NAME}" "$*" >&2; }

installed_version() {
    # Reads the installed package.json without starting the CLI.
    local pkg="${1}/node_modules/${PACKAGE}/package.json"
    [[ -f "${pkg}" ]] || return 1
    node -e 'process.stdout.write(String(require(process.argv[1]).version))' "${pkg}"
}

is_installed() {
    [[ -f "${marker}" && -x "${exe}" ]] && [[ "$(installed_version "${prefix}" 2>/dev/null)" == "${VERSION}" ]]
}

# Node trusts only its bundled CAs unless told otherwise; a machine whose registry access goes
# through a CA of its own has it in the system bundle, which pip and curl read. Use that bundle
# when no other is set, so a plain environment installs as the user's shell would.
system_cas=/etc/ssl/certs/ca-certificates.crt
if [[ -z "${NODE_EXTRA_CA_CERTS:-}" && -r "${system_cas}" ]]; then
    export NODE_EXTRA_CA_CERTS="${system_cas}"
fi

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

exec 9> "${tools_dir}/.install-${NAME}.lock"
flock 9
if is_installed; then  # another run finished while we waited
    printf '%s\n' "${exe}"
    exit 0
fi

staging="$(mktemp -d "${tools_dir}/${NAME}.staging.XXXXXX")"
chmod 755 "${staging}"
trap 'rm -rf "${staging}"' EXIT

log "installing ${PACKAGE}@${VERSION} into ${prefix} (node $(node --version), npm $(npm --version))"
printf '{\n  "name": "remote-acp-tools-%s",\n  "private": true\n}\n' "${NAME}" > "${staging}/package.json"
npm install \
    --prefix "${staging}" \
    --save-exact \
    --no-audit \
    --no-fund \
    --no-update-notifier \
    --ignore-scripts \
    --loglevel=warn \
    --fetch-timeout=120000 \
    --fetch-retries=2 \
    "${PACKAGE}@${VERSION}" >&2

staged_exe="${staging}/node_modules/.bin/${BIN}"
got="$(installed_version "${staging}")"
if [[ "${got}" != "${VERSION}" ]]; then
    log "npm installed version '${got}', expected ${VERSION}"
    exit 1
fi
# The CLI itself must start on this node (some declare engines >=22 and run on 20).
ran="$(HOME="${staging}/home" "${staged_exe}" --version 2>/dev/null)" || {
    log "'${BIN} --version' failed on node $(node --version)"
    exit 1
}
if [[ "${EXACT}" == --version-is-exact && "${ran}" != "${VERSION}" ]]; then
    log "'${BIN} --version' printed '${ran}', expected ${VERSION}"
    exit 1
fi
rm -rf "${staging}/home"
touch "${staging}/.installed-${VERSION}"

rm -rf "${prefix}"
mv "${staging}" "${prefix}"
trap - EXIT
log "installed ${PACKAGE} ${VERSION}"
printf '%s\n' "${exe}"
