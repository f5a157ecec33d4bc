"""Grafana region annotations per step (POST /api/annotations with time and timeEnd in ms).

Annotating is a convenience: every failure is logged and swallowed, never fatal to a sweep.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import requests

Log = Callable[[str], None]
TOKEN_ENV = "CEPHSCOPE_GRAFANA_TOKEN"


class GrafanaAnnotator:
    def __init__(self, url: str, token: str | None = None, *, timeout_seconds: float = 5.0,
                 dashboard_uid: str | None = None, log: Log = print) -> None:
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.timeout_seconds = timeout_seconds
        self.dashboard_uid = dashboard_uid
        self.log = log
        self.sent = 0
        self.failed = 0

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    @staticmethod
    def tags_for(run_id: str, step_id: str, benchmark: str,
                 params: Mapping[str, str]) -> list[str]:
        tags = ["cephscope", f"run:{run_id}", f"step:{step_id}", f"benchmark:{benchmark}"]
        tags += [f"{k}:{v}" for k, v in params.items()]
        return tags

    def annotate(self, start_ts: float, end_ts: float, tags: list[str], text: str) -> int | None:
        """Post one region annotation; return its id, or None (logged) on any failure."""
        body: dict[str, Any] = {
            "time": int(start_ts * 1000),
            "timeEnd": int(end_ts * 1000),
            "tags": tags,
            "text": text,
        }
        if self.dashboard_uid:
            body["dashboardUID"] = self.dashboard_uid
        try:
            resp = requests.post(f"{self.url}/api/annotations", json=body,
                                 headers=self._headers(), timeout=self.timeout_seconds)
        except requests.RequestException as exc:
            self.failed += 1
            self.log(f"grafana annotation failed (not fatal): {exc}")
            return None
        if resp.status_code >= 300:
            self.failed += 1
            self.log(f"grafana annotation failed (not fatal): HTTP {resp.status_code} "
                     f"{resp.text[:200]}")
            return None
        self.sent += 1
        try:
            return int(resp.json().get("id"))
        except (ValueError, TypeError, AttributeError):
            return None
