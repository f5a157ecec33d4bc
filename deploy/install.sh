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
    # CephFS and the RADOS gateway as benchmark targets, and the FUSE clients that mount them
    ceph-mds radosgw ceph-fuse rbd-fuse
    prometheus prometheus-alertmanager prometheus-node-exporter
    fio python3 python3-venv coreutils grep dash util-linux mount iproute2 procps curl openssl
    # namespace hosts of the multi-host dev cluster are reached over SSH like real hosts
    openssh-server openssh-client
    # a container engine: the fresh-install check and the exporter's image
    podman runc git tar
    catatonit  # podman --init (cephadm runs every Ceph daemon with it)
    # headless browser: the report tests open report.html in it (Selenium drives it through
    # chromium-driver)
    chromium chromium-driver
    mmdebstrap  # root filesystems of other Ceph releases (deploy/rootfs.py)
    # cephadm's own spec code (ceph.deployment.service_spec) and its deploy script: the
    # custom-container service spec of deploy/cephadm is checked with them, and mgr/cephadm's
    # Prometheus template is rendered with the extra scrape job
    python3-ceph-common cephadm ceph-mgr-cephadm
    systemd  # systemd-analyze verify: the exporter's unit (deploy/systemd)
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
# kubeconform: validates the Rook manifests (deploy/rook) offline. Built like compose-config from
# deploy/kubeconform (a Go module pinning it as a tool). Its JSON schemas are generated here,
# never committed: the Kubernetes kinds from k8s.io/kubernetes's api/openapi-spec/swagger.json
# (deploy/k8s_schemas.py), the ServiceMonitor from prometheus-operator's CRD by kubeconform's own
# scripts/openapi2jsonschema.py; both modules come from the Go module proxy, checked against
# the sums below (and the Go checksum database).
kubeconform_src="$repo_root/deploy/kubeconform"
kubeconform_bin="$venv/bin/kubeconform"
schemas="$venv/share/kubeconform-schemas"
schemas_stamp="$schemas/.sources"
if ! command -v go >/dev/null && [[ ! -x "$kubeconform_bin" || ! -f "$schemas_stamp" ]]; then
    echo "install: Go >= 1.24 is needed to build $kubeconform_bin and its schemas (validate deploy/rook)" >&2
    exit 1
fi
if [[ ! -x "$kubeconform_bin" || -n "$(find "$kubeconform_src" -newer "$kubeconform_bin" -type f)" ]]; then
    go_log="$venv/go-build.log"
    if ! (cd "$kubeconform_src" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
            go build -trimpath -o "$kubeconform_bin" github.com/yannh/kubeconform/cmd/kubeconform) \
            >"$go_log" 2>&1; then
        tail -20 "$go_log" >&2
        echo "install: building kubeconform failed (full log: $go_log)" >&2
        exit 1
    fi
fi
k8s_module="k8s.io/kubernetes@v1.31.4 h1:VQDX52gTQnq8C/jCo48AQuDsWbWMh9XXxhQRDYjgakw="
promop_module="github.com/prometheus-operator/prometheus-operator@v0.80.1 h1:jeqy9C8ku5coMThZh/cVrB5FwJHlV98jvnSeVnQKCQw="
# The directory of a module version from the module proxy, after checking its sum.
module_dir() {
    local mod="${1% *}" sum="${1#* }" info
    info="$(cd / && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "$mod")" || {
        echo "install: go mod download $mod failed: $info" >&2
        return 1
    }
    "$venv/bin/python" -c '
import json, sys
info = json.loads(sys.argv[1])
got, want = info.get("Sum"), sys.argv[2]
if got != want:
    sys.exit("install: %s@%s has sum %s, expected %s" % (info.get("Path"), info.get("Version"), got, want))
print(info["Dir"])' "$info" "$sum"
}
if [[ ! -f "$schemas_stamp" || "$(cat "$schemas_stamp")" != "$k8s_module $promop_module" \
        || "$repo_root/deploy/k8s_schemas.py" -nt "$schemas_stamp" ]]; then
    rm -rf "$schemas"
    mkdir -p "$schemas"
    k8s_dir="$(module_dir "$k8s_module")"
    promop_dir="$(module_dir "$promop_module")"
    kubeconform_dir="$(cd "$kubeconform_src" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
        go list -m -f '{{.Dir}}' github.com/yannh/kubeconform)"
    schema_log="$venv/kubeconform-schemas.log"
    if ! { "$venv/bin/python" -m cephscope.deploy.k8s_schemas \
                "$k8s_dir/api/openapi-spec/swagger.json" "$schemas" DaemonSet Service \
            && (cd "$schemas" && FILENAME_FORMAT='{kind}-{group}-{version}' DENY_ROOT_ADDITIONAL_PROPERTIES=1 \
                "$venv/bin/python" "$kubeconform_dir/scripts/openapi2jsonschema.py" \
                "$promop_dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"); \
            } >"$schema_log" 2>&1; then
        tail -20 "$schema_log" >&2
        echo "install: generating kubeconform's schemas failed (full log: $schema_log)" >&2
        exit 1
    fi
    echo "$k8s_module $promop_module" > "$schemas_stamp"
fi
"$venv/bin/python" -c 'import rados, rbd' || {
    echo "install: the venv cannot import rados/rbd (python3-rados, python3-rbd)" >&2
    exit 1
}
echo "install: ok ($venv)"
