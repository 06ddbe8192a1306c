"""Write the Kubernetes JSON schemas kubeconform needs, offline, from the Kubernetes module on the Go proxy.

kubeconform normally downloads schemas from GitHub, which CI cannot reach. The Kubernetes source module
(`k8s.io/kubernetes`, served by the Go module proxy like any Go dependency) carries the API server's own
OpenAPI document (`api/openapi-spec/swagger.json`). This script turns the kinds Parley deploys into strict,
self-contained JSON schemas laid out the way kubeconform looks them up (`<kind>-<group>-<version>.json`):

- only the definitions each kind reaches are kept, inside the kind's own file (no cross-file refs);
- descriptions and formats are dropped (they are most of the bytes and validate nothing);
- every object with declared properties rejects unknown fields (kubeconform `-strict`);
- `Quantity` accepts strings and numbers, `IntOrString` strings and integers, as the API server does.

Run it after adding a kind to the manifests (the validator fails on a kind with no schema):

    python deploy/schemas/generate.py            # uses `go mod download` for the pinned version
    python deploy/schemas/generate.py --swagger path/to/swagger.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

KUBERNETES_VERSION = "v1.33.13"
OUT_DIR = Path(__file__).resolve().parent / KUBERNETES_VERSION

# (group, version, kind) for every kind under deploy/k8s. Core group is "".
KINDS: tuple[tuple[str, str, str], ...] = (
    ("", "v1", "ConfigMap"),
    ("", "v1", "Namespace"),
    ("", "v1", "PersistentVolumeClaim"),
    ("", "v1", "Secret"),
    ("", "v1", "Service"),
    ("", "v1", "ServiceAccount"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "StatefulSet"),
    ("autoscaling", "v2", "HorizontalPodAutoscaler"),
    ("networking.k8s.io", "v1", "NetworkPolicy"),
    ("policy", "v1", "PodDisruptionBudget"),
)

_REF_PREFIX = "#/definitions/"
_OVERRIDES: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": ["string", "number"]},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": ["string", "integer"]},
}
_DROPPED_KEYS = {"description", "format", "x-kubernetes-list-map-keys", "x-kubernetes-list-type"}
_DROPPED_KEYS |= {"x-kubernetes-patch-merge-key", "x-kubernetes-patch-strategy", "x-kubernetes-unions"}
_DROPPED_KEYS |= {
    "x-kubernetes-map-type",
    "x-kubernetes-group-version-kind",
    "x-kubernetes-preserve-unknown-fields",
}


def swagger_from_go_proxy(version: str) -> Path:
    """Fetch (or reuse from the Go module cache) the Kubernetes module and return its swagger.json."""
    try:
        out = subprocess.run(
            ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise SystemExit(f"generate: could not download k8s.io/kubernetes@{version} with go: {err}") from None
    info = json.loads(out)
    if "Dir" not in info:
        raise SystemExit(f"generate: go mod download gave no directory: {info.get('Error', out.strip())}")
    return Path(info["Dir"]) / "api" / "openapi-spec" / "swagger.json"


def schema_file_name(group: str, version: str, kind: str) -> str:
    """The file name kubeconform's `{{ .ResourceKind }}{{ .KindSuffix }}.json` template expands to."""
    api_version = f"{group}/{version}" if group else version
    parts = api_version.split("/")
    suffix = "-" + parts[0].split(".")[0].lower()
    if len(parts) > 1:
        suffix += "-" + parts[1].lower()
    return f"{kind.lower()}{suffix}.json"


def _definition_name(definitions: dict[str, Any], group: str, version: str, kind: str) -> str:
    for name, body in definitions.items():
        for gvk in body.get("x-kubernetes-group-version-kind", []):
            if (gvk.get("group", ""), gvk.get("version"), gvk.get("kind")) == (group, version, kind):
                return name
    raise SystemExit(
        f"generate: no definition for {group or 'core'}/{version} {kind} in the OpenAPI document"
    )


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            yield ref[len(_REF_PREFIX) :]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _reachable(definitions: dict[str, Any], root: str) -> list[str]:
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen or name in _OVERRIDES:
            seen.add(name)
            continue
        seen.add(name)
        todo.extend(_refs(definitions[name]))
    return sorted(seen)


def _clean(node: Any) -> Any:
    """Drop documentation-only keys and make every declared object strict."""
    if isinstance(node, list):
        return [_clean(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "properties":
            out[key] = {name: _clean(prop) for name, prop in value.items()}
        else:
            out[key] = _clean(value)
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def kind_schema(definitions: dict[str, Any], group: str, version: str, kind: str) -> dict[str, Any]:
    root = _definition_name(definitions, group, version, kind)
    keep = {name: _OVERRIDES.get(name) or _clean(definitions[name]) for name in _reachable(definitions, root)}
    api_version = f"{group}/{version}" if group else version
    schema = dict(keep.pop(root))
    props = dict(schema["properties"])
    props["apiVersion"] = {"type": "string", "enum": [api_version]}
    props["kind"] = {"type": "string", "enum": [kind]}
    schema["properties"] = props
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind"})
    schema["definitions"] = keep
    return schema


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swagger", type=Path, help="swagger.json to read instead of the Go module")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)

    swagger = args.swagger or swagger_from_go_proxy(KUBERNETES_VERSION)
    try:
        definitions = json.loads(swagger.read_text())["definitions"]
    except (OSError, ValueError, KeyError) as err:
        raise SystemExit(f"generate: cannot read OpenAPI definitions from {swagger}: {err}") from None

    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.json"):
        old.unlink()
    total = 0
    for group, version, kind in KINDS:
        path = args.out / schema_file_name(group, version, kind)
        text = json.dumps(
            kind_schema(definitions, group, version, kind), sort_keys=True, separators=(",", ":")
        )
        path.write_text(text + "\n")
        total += len(text)
        print(f"{path.name:48s} {len(text) / 1024:7.1f} KiB")
    print(f"{len(KINDS)} schemas, {total / 1024:.0f} KiB, Kubernetes {KUBERNETES_VERSION}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
