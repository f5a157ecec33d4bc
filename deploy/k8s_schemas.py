"""Kubernetes JSON schemas for kubeconform, generated from the Kubernetes OpenAPI (swagger) spec.

kubeconform validates manifests against one JSON schema per kind, named as its
`{{ .ResourceKind }}{{ .KindSuffix }}.json` template expects (`daemonset-apps-v1.json`,
`service-v1.json`). This writes them from `api/openapi-spec/swagger.json` of a `k8s.io/kubernetes`
module (deploy/install.sh fetches it from the Go module proxy) the way kubeconform's
openapi2jsonschema does for strict schemas: objects with properties get
`additionalProperties: false` (an unknown field is an error, as for `kubectl`), `int-or-string`
becomes string or integer. Each file is standalone: the kind's definition and every definition
it reaches.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

REF_PREFIX = "#/definitions/"


def _strict(node: Any) -> Any:
    """A copy with additionalProperties: false on objects with properties, int-or-string opened."""
    if isinstance(node, list):
        return [_strict(x) for x in node]
    if not isinstance(node, dict):
        return node
    if node.get("format") == "int-or-string":
        return {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    out = {k: _strict(v) for k, v in node.items()}
    if "properties" in node and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            yield ref[len(REF_PREFIX):]
        for v in node.values():
            yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def reachable(definitions: dict[str, Any], root: str) -> dict[str, Any]:
    """``root`` and every definition its $refs reach."""
    found: dict[str, Any] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found[name] = definitions[name]
        todo.extend(_refs(definitions[name]))
    return found


def schema_name(kind: str, group: str, version: str) -> str:
    """kubeconform's file name for a kind: `daemonset-apps-v1.json`, `service-v1.json`."""
    suffix = f"-{group.split('.')[0].lower()}-{version.lower()}" if group else f"-{version.lower()}"
    return f"{kind.lower()}{suffix}.json"


def kinds_of(swagger: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> the definition that describes it."""
    out: dict[tuple[str, str, str], str] = {}
    for name, definition in swagger["definitions"].items():
        for gvk in definition.get("x-kubernetes-group-version-kind", []):
            out[(gvk["group"], gvk["version"], gvk["kind"])] = name
    return out


def write_schemas(swagger: dict[str, Any], kinds: Sequence[str], out_dir: Path) -> list[Path]:
    """One standalone strict schema per (group, version) of each kind named; raises KeyError
    for a kind the spec does not define."""
    definitions = swagger["definitions"]
    by_gvk = kinds_of(swagger)
    written: list[Path] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        matches = [(gvk, name) for gvk, name in by_gvk.items() if gvk[2] == kind]
        if not matches:
            raise KeyError(f"kind {kind!r} is not in the OpenAPI spec")
        for (group, version, _), name in matches:
            schema = {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "allOf": [{"$ref": REF_PREFIX + name}],
                "definitions": _strict(reachable(definitions, name)),
            }
            path = out_dir / schema_name(kind, group, version)
            path.write_text(json.dumps(schema, indent=1, sort_keys=True))
            written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cephscope.deploy.k8s_schemas",
        description="Write kubeconform's strict JSON schemas of KINDs from a Kubernetes swagger.json.")
    parser.add_argument("swagger", type=Path, help="api/openapi-spec/swagger.json of k8s.io/kubernetes")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("kinds", nargs="+", metavar="KIND")
    args = parser.parse_args(argv)
    try:
        written = write_schemas(json.loads(args.swagger.read_text()), args.kinds, args.out_dir)
    except KeyError as e:
        print(f"k8s_schemas: {e.args[0]}", file=sys.stderr)
        return 1
    print(f"k8s_schemas: {len(written)} schemas in {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
