"""Grafana dashboards as code; a build step that writes JSON."""
