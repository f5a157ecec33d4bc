#!/usr/bin/env bash
# `make demo`: from nothing to a finished sweep with its report on the embedded dev cluster.
# Brings up the dev cluster and the local stack (or reuses them when already running), runs
# examples/demo.yaml, writes the report, and prints where everything is.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="${1:-$HOME/.local/state/cephscope/demo}"
cephscope="$repo_root/.venv/bin/cephscope"
cluster_dir="$state/cluster"
stack_dir="$state/stack"
cluster_port_base="${CEPHSCOPE_DEMO_CLUSTER_PORT_BASE:-17000}"
stack_port_base="${CEPHSCOPE_DEMO_STACK_PORT_BASE:-18000}"
mkdir -p "$state"

if "$cephscope" devcluster status --state-dir "$cluster_dir" >/dev/null 2>&1; then
    echo "demo: dev cluster in $cluster_dir is already up"
else
    "$cephscope" devcluster up --state-dir "$cluster_dir" --port-base "$cluster_port_base"
fi
if "$cephscope" stack status --state-dir "$stack_dir" >/dev/null 2>&1; then
    echo "demo: stack in $stack_dir is already up"
else
    "$cephscope" stack up --state-dir "$stack_dir" --port-base "$stack_port_base" \
        --cluster-state-dir "$cluster_dir"
fi

prometheus="http://127.0.0.1:$stack_port_base"
runner_port=$((stack_port_base + 5))
echo "demo: one real scrape of the exporter (first lines):"
curl -fsS "http://127.0.0.1:$((stack_port_base + 4))/metrics" | grep -E '^(ceph_osd_op_w[{ ]|cephscope_osd_op_latency_seconds_count|cephscope_daemon_up)' | head -6

run_dir="$state/results/demo-$(date -u +%Y%m%dT%H%M%SZ)"
"$cephscope" sweep "$repo_root/examples/demo.yaml" \
    --devcluster "$cluster_dir" \
    --metrics-port "$runner_port" \
    --prometheus-url "$prometheus" \
    --results-dir "$run_dir"
"$cephscope" report "$run_dir" --prometheus-url "$prometheus"

echo
echo "demo: done"
echo "  results:     $run_dir"
echo "  summary:     $run_dir/summary.csv"
echo "  report:      $run_dir/report.md"
echo "  Prometheus:  $prometheus  (try: cephscope_step_info)"
echo "  stop all:    make demo-down"
