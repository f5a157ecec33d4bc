"""cephscope-exporter: per-host Prometheus exporter reading Ceph admin sockets.

Runs alone on production hosts: imports nothing from the runner, deploy or dashboards.
"""
