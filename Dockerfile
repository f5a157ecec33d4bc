# cephscope-exporter: reads the host's admin sockets (mount /var/run/ceph read-only).
FROM debian:12-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-rados ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/cephscope
COPY pyproject.toml README.md ./
COPY cephscope ./cephscope
COPY exporter ./exporter
COPY runner ./runner
COPY deploy ./deploy
COPY dashboards ./dashboards
RUN /usr/bin/python3 -m venv --system-site-packages /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir .
# Runs as root in the container: admin sockets are writable only by their owner (the ceph
# user) or root, and they are mounted read-only.
ENTRYPOINT ["/opt/venv/bin/cephscope-exporter"]
CMD ["--web.listen-address=127.0.0.1:9967", "--ceph.asok-dir=/var/run/ceph"]
