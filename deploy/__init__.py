"""Dev cluster (real single-host Ceph on 127.0.0.1) and the local monitoring stack."""
