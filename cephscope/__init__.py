"""cephscope: Prometheus exporter, sweep runner and monitoring stack for Ceph performance work."""

__version__ = "0.1.0"
