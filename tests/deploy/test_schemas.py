"""deploy/schemas/generate.py: kubeconform's file naming, strictness, and the committed schema set."""

from __future__ import annotations

import json
from pathlib import Path

from deploy.schemas.generate import KINDS, OUT_DIR, kind_schema, schema_file_name

SWAGGER = {
    "definitions": {
        "io.k8s.api.apps.v1.Thing": {
            "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Thing"}],
            "description": "docs",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.ThingSpec"},
            },
        },
        "io.k8s.api.apps.v1.ThingSpec": {
            "properties": {
                "size": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["size"],
        },
        "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string", "format": "quantity"},
        "io.k8s.api.apps.v1.Unrelated": {"properties": {"x": {"type": "string"}}},
    }
}


def test_file_names_follow_kubeconform() -> None:
    assert schema_file_name("", "v1", "ConfigMap") == "configmap-v1.json"
    assert schema_file_name("apps", "v1", "Deployment") == "deployment-apps-v1.json"
    assert schema_file_name("networking.k8s.io", "v1", "NetworkPolicy") == "networkpolicy-networking-v1.json"
    assert schema_file_name("autoscaling", "v2", "HorizontalPodAutoscaler") == (
        "horizontalpodautoscaler-autoscaling-v2.json"
    )


def test_kind_schema_is_strict_self_contained_and_lean() -> None:
    schema = kind_schema(SWAGGER["definitions"], "apps", "v1", "Thing")
    assert schema["additionalProperties"] is False
    assert schema["properties"]["kind"] == {"type": "string", "enum": ["Thing"]}
    assert schema["properties"]["apiVersion"]["enum"] == ["apps/v1"]
    defs = schema["definitions"]
    assert set(defs) == {"io.k8s.api.apps.v1.ThingSpec", "io.k8s.apimachinery.pkg.api.resource.Quantity"}
    assert defs["io.k8s.api.apps.v1.ThingSpec"]["additionalProperties"] is False
    assert defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] == {"type": ["string", "number"]}
    assert "description" not in json.dumps(schema)
    # a map keeps its own value schema
    assert defs["io.k8s.api.apps.v1.ThingSpec"]["properties"]["labels"]["additionalProperties"] == {
        "type": "string"
    }


def test_committed_schemas_cover_every_listed_kind_and_stay_small() -> None:
    files = {p.name for p in OUT_DIR.glob("*.json")}
    assert files == {schema_file_name(*gvk) for gvk in KINDS}
    total = sum(p.stat().st_size for p in Path(OUT_DIR).glob("*.json"))
    assert total < 1_000_000
    deployment = json.loads((OUT_DIR / "deployment-apps-v1.json").read_text())
    pod_spec = deployment["definitions"]["io.k8s.api.core.v1.PodSpec"]
    assert "initContainers" in pod_spec["properties"] and pod_spec["additionalProperties"] is False
    container = deployment["definitions"]["io.k8s.api.core.v1.Container"]
    assert "restartPolicy" in container["properties"]  # native sidecars exist in this API version
