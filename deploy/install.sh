#!/usr/bin/env bash
# Installs what cephscope needs on Debian 12 (as root): Ceph 16.2, Prometheus,
# Alertmanager, node_exporter, fio from Debian's packages, and the project's venv.
# Idempotent: a second run only checks.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${CEPHSCOPE_VENV:-$repo_root/.venv}"

# Every package of a program the project or its tests run (cephscope/host_commands.py names
# them; tests/unit/test_host_commands.py holds this list to that table).
debian_packages=(
    ceph-mon ceph-mgr ceph-osd ceph-common ceph-base python3-rados python3-rbd
    prometheus prometheus-alertmanager prometheus-node-exporter
    fio python3 python3-venv coreutils grep dash util-linux mount iproute2 procps curl openssl
    # namespace hosts of the multi-host dev cluster are reached over SSH like real hosts
    openssh-server openssh-client
    # a container engine: the fresh-install check and the exporter's image
    podman runc git
    # headless browser: the report tests open report.html in it (Selenium drives it through
    # chromium-driver)
    chromium chromium-driver
    mmdebstrap  # root filesystems of other Ceph releases (deploy/rootfs.py)
)

missing=()
for pkg in "${debian_packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "install: missing Debian packages (${missing[*]}); run as root or install them first" >&2
        exit 1
    fi
    echo "install: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # policy-rc.d keeps package scripts from starting daemons of their own.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi

# python3-rados is built for Debian's interpreter: the venv must come from it.
if [[ ! -x "$venv/bin/python" ]]; then
    echo "install: creating $venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
stamp="$venv/.cephscope-installed"
if [[ ! -f "$stamp" || "$repo_root/pyproject.toml" -nt "$stamp" ]]; then
    pip_log="$venv/pip-install.log"
    if ! { "$venv/bin/pip" install -q --upgrade pip && "$venv/bin/pip" install -q -e "$repo_root[dev]"; } \
        >"$pip_log" 2>&1; then
        tail -20 "$pip_log" >&2
        echo "install: pip install failed (full log: $pip_log)" >&2
        exit 1
    fi
    # Wheels of the build backend and the exporter's core dependencies (read from
    # pyproject.toml): the test that installs the exporter alone into a fresh venv uses
    # them instead of the network.
    if ! "$venv/bin/python" - "$repo_root/pyproject.toml" >"$venv/wheelhouse-requirements.txt" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    pyproject = tomllib.load(f)
print("\n".join(pyproject["build-system"]["requires"] + pyproject["project"]["dependencies"]))
PY
    then
        echo "install: cannot read the wheelhouse requirements from pyproject.toml" >&2
        exit 1
    fi
    if ! "$venv/bin/pip" wheel -q --only-binary=:all: -w "$venv/wheelhouse" \
        -r "$venv/wheelhouse-requirements.txt" >>"$pip_log" 2>&1; then
        tail -20 "$pip_log" >&2
        echo "install: pip wheel of the wheelhouse requirements failed (full log: $pip_log)" >&2
        exit 1
    fi
    touch "$stamp"
fi
# compose-config: `docker compose config` without Docker (compose-go, the Compose spec's Go
# loader) to validate docker-compose.yml in the tests. Built once from deploy/compose-config
# with the Go toolchain on PATH (modules from the Go module proxy); rebuilt when its source
# changes.
compose_src="$repo_root/deploy/compose-config"
compose_bin="$venv/bin/compose-config"
if [[ ! -x "$compose_bin" || -n "$(find "$compose_src" -newer "$compose_bin" -type f)" ]]; then
    if ! command -v go >/dev/null; then
        echo "install: Go >= 1.24 is needed to build $compose_bin (validates docker-compose.yml)" >&2
        exit 1
    fi
    go_log="$venv/go-build.log"
    if ! (cd "$compose_src" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
            go build -trimpath -o "$compose_bin" .) >"$go_log" 2>&1; then
        tail -20 "$go_log" >&2
        echo "install: building compose-config failed (full log: $go_log)" >&2
        exit 1
    fi
fi
"$venv/bin/python" -c 'import rados, rbd' || {
    echo "install: the venv cannot import rados/rbd (python3-rados, python3-rbd)" >&2
    exit 1
}
echo "install: ok ($venv)"
