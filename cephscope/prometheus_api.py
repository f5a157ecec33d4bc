"""The one client of Prometheus' HTTP API (`/api/v1/...`) that the runner, the stack and the
tests use: instant and range queries, targets, series. Standard library only, so the deploy
side needs nothing the exporter host lacks.

Two kinds of failure, because callers treat them differently: `PrometheusUnreachable` (no
answer at all: refused, timed out, connection dropped — asking again now is pointless) and
`PrometheusError` (Prometheus answered, with an error: a bad query, an unknown endpoint).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Params = Mapping[str, str] | Sequence[tuple[str, str]]


class PrometheusError(RuntimeError):
    """Prometheus answered with an error (the message is its own, or the HTTP status)."""


class PrometheusUnreachable(PrometheusError):
    """Prometheus did not answer at all."""


@dataclass(frozen=True)
class PrometheusAPI:
    url: str
    timeout_seconds: float = 30.0

    def get(self, endpoint: str, params: Params = ()) -> Any:
        """`data` of GET /api/v1/<endpoint>?params."""
        query = urllib.parse.urlencode(params)
        address = f"{self.url.rstrip('/')}/api/v1/{endpoint.lstrip('/')}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(address, timeout=self.timeout_seconds) as reply:
                raw, status = reply.read(), reply.status
        except urllib.error.HTTPError as exc:  # Prometheus says why in a JSON body
            raw, status = exc.read() or b"{}", exc.code
        except urllib.error.URLError as exc:
            raise PrometheusUnreachable(str(exc.reason)) from exc
        except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            raise PrometheusUnreachable(str(exc) or type(exc).__name__) from exc
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise PrometheusError(f"HTTP {status}: not JSON") from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise PrometheusError(error or f"HTTP {status}")
        return body.get("data")

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.get("query", params)["result"]

    def query_range(self, promql: str, start: float, end: float, step: float
                    ) -> list[dict[str, Any]]:
        return self.get("query_range", {"query": promql, "start": f"{start:.3f}",
                                        "end": f"{end:.3f}", "step": f"{step:g}"})["result"]

    def active_targets(self) -> list[dict[str, Any]]:
        return self.get("targets", {"state": "active"})["activeTargets"]
