# cephscope-exporter: reads the host's admin sockets (mount /var/run/ceph read-only).
# The image holds the exporter alone: its package, its core dependencies (the `dependencies`
# of pyproject.toml), nothing of the runner, dev cluster or dashboards.
FROM debian:12-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-rados ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN /usr/bin/python3 -m venv --system-site-packages /opt/venv
WORKDIR /opt/cephscope
COPY pyproject.toml ./
RUN /usr/bin/python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > core-requirements.txt \
    && /opt/venv/bin/pip install --no-cache-dir -r core-requirements.txt
COPY cephscope/__init__.py cephscope/monclient.py /opt/venv/lib/python3.11/site-packages/cephscope/
COPY exporter /opt/venv/lib/python3.11/site-packages/cephscope/exporter
# Not root: the exporter only connects to admin sockets (which needs write permission on
# them: their owner, the ceph user) and reads `osd metadata` with a mon 'allow r' key.
# Ceph's own images (cephadm, Rook) run the daemons as ceph, uid/gid 167; on a host whose
# ceph user has another uid (Debian's packages pick one), run with
# --user "$(id -u ceph):$(id -g ceph)" (docker-compose.yml: CEPH_UID/CEPH_GID).
RUN (getent group 167 >/dev/null || groupadd --system --gid 167 ceph) \
    && (getent passwd 167 >/dev/null || useradd --system --uid 167 --gid 167 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin ceph)
USER 167:167
ENTRYPOINT ["/opt/venv/bin/python3", "-m", "cephscope.exporter.main"]
CMD ["--web.listen-address=127.0.0.1:9967", "--ceph.asok-dir=/var/run/ceph"]
