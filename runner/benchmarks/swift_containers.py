"""Removing a step's Swift containers from the gateway (python-swiftclient, from the runner's
host): every container whose name starts with the step's prefix, its objects first.

swift-bench and getput delete their own objects and containers when their run ends; this is
what a failed or interrupted step (or `delete: false`) leaves. Objects are deleted one request
at a time: a few thousand take tens of seconds on a small gateway.
"""

from __future__ import annotations

from cephscope.runner.rgw_endpoint import RgwEndpoint

# Swift answers "not found" with 404: a container or object already gone is fine.
NOT_FOUND = 404


def remove_containers(rgw: RgwEndpoint, prefix: str, timeout_seconds: float = 60.0) -> int:
    """Delete every container named `prefix…` and its objects; return how many containers.
    Raises swiftclient's ClientException (or a connection error) for anything but a 404."""
    from swiftclient.client import ClientException, Connection

    if not prefix:
        raise ValueError("refusing to remove containers without a name prefix")
    conn = Connection(authurl=rgw.swift_auth_url, user=rgw.swift_user, key=rgw.swift_key,
                      auth_version="1.0", retries=1, timeout=timeout_seconds)
    removed = 0
    try:
        _headers, containers = conn.get_account(prefix=prefix, full_listing=True)
        for container in containers:
            name = container["name"]
            if not name.startswith(prefix):  # the gateway filtered; this is its word only
                continue
            try:
                _headers, objects = conn.get_container(name, full_listing=True)
                for obj in objects:
                    try:
                        conn.delete_object(name, obj["name"])
                    except ClientException as exc:
                        if exc.http_status != NOT_FOUND:
                            raise
                conn.delete_container(name)
                removed += 1
            except ClientException as exc:
                if exc.http_status != NOT_FOUND:
                    raise
    finally:
        conn.close()
    return removed
