"""Deployment rules the schemas cannot express: non-root, pinned images, secrets only from Secrets,
one engine per MIG slice beside its worker, drain time matching the grace period, PDBs and the HPA."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
WORKLOAD_KINDS = {"Deployment", "StatefulSet"}


def load(paths: list[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in paths:
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


APPLIED = load(sorted(K8S.glob("*.yaml")))  # what `kubectl apply -f deploy/k8s/` creates
SECRETS = load([K8S / "examples" / "secrets.example.yaml"])


def find(kind: str, name: str) -> dict[str, Any]:
    for doc in APPLIED:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise AssertionError(f"no {kind} {name}")


def workloads() -> Iterator[dict[str, Any]]:
    yield from (d for d in APPLIED if d["kind"] in WORKLOAD_KINDS)


def containers(pod: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from pod.get("initContainers", [])
    yield from pod["containers"]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def test_every_workload_runs_non_root_without_privileges() -> None:
    for wl in workloads():
        pod = wl["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, wl["metadata"]["name"]
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert pod.get("automountServiceAccountToken") is False
        for c in containers(pod):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, c["name"]
            assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]


def test_images_are_pinned_and_resources_requested() -> None:
    for wl in workloads():
        for c in containers(wl["spec"]["template"]["spec"]):
            image = c["image"]
            # tag for people, digest for the node: a tag can be re-pointed, a digest cannot
            assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", image), image
            assert ":latest@" not in image, image
            assert "cpu" in c["resources"]["requests"] and "memory" in c["resources"]["limits"], c["name"]


def test_probes_on_every_long_running_container() -> None:
    for wl in workloads():
        pod = wl["spec"]["template"]["spec"]
        long_running = [
            *pod["containers"],
            *(c for c in pod.get("initContainers", []) if c.get("restartPolicy")),
        ]
        for c in long_running:
            assert "livenessProbe" in c, c["name"]
            assert "readinessProbe" in c or "startupProbe" in c, c["name"]


def test_secret_values_come_only_from_kubernetes_secrets() -> None:
    defined = {
        (s["metadata"]["namespace"], s["metadata"]["name"], key) for s in SECRETS for key in s["stringData"]
    }
    sensitive = re.compile(r"SECRET|PASSWORD|TOKEN|API_KEY|KEYS|SIP_CONFIG")
    for doc in APPLIED:
        assert doc["kind"] != "Secret", "real secrets must not live in deploy/k8s"
        if doc["kind"] == "ConfigMap":
            for key in doc["data"]:
                assert not sensitive.search(key), key
    for wl in workloads():
        ns = wl["metadata"]["namespace"]
        for c in containers(wl["spec"]["template"]["spec"]):
            for name, entry in env_of(c).items():
                ref = entry.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert (ns, ref["name"], ref["key"]) in defined, (ns, ref)
                elif sensitive.search(name):
                    # only compositions of secret-sourced variables, e.g. LIVEKIT_KEYS
                    assert re.fullmatch(r"(\$\([A-Z_]+\)|[: ])+", entry["value"]), name


def test_engine_is_a_sidecar_on_one_mig_slice_sharing_a_socket_with_its_worker() -> None:
    pod = find("Deployment", "parley-host")["spec"]["template"]["spec"]
    engine = next(c for c in pod["initContainers"] if c["name"] == "engine")
    worker = next(c for c in pod["containers"] if c["name"] == "worker")
    assert engine["restartPolicy"] == "Always"  # native sidecar: up before, down after the worker
    assert [c["name"] for c in pod["initContainers"]].index("engine-prepare") == 0

    mig = {k: v for k, v in engine["resources"]["limits"].items() if k.startswith("nvidia.com/mig-")}
    assert list(mig.values()) == [1], "exactly one MIG slice per engine"
    assert not any(k.startswith("nvidia.com/") for k in worker["resources"]["requests"])

    config = find("ConfigMap", "parley-worker")["data"]
    socket = Path(config["PARLEY_ENGINE_ADDRESS"].removeprefix("unix://"))
    mounts = {c["name"]: {m["name"]: m["mountPath"] for m in c["volumeMounts"]} for c in (engine, worker)}
    assert mounts["engine"]["engine-socket"] == mounts["worker"]["engine-socket"]
    # the socket sits in a directory the engine creates 0700 inside the shared (world-writable) emptyDir
    assert socket.parent.parent == Path(mounts["engine"]["engine-socket"])
    assert env_of(engine)["PARLEY_ENGINE_ADDRESS"]["value"] == config["PARLEY_ENGINE_ADDRESS"]


def test_grace_period_covers_the_worker_drain_timeout() -> None:
    deployment = find("Deployment", "parley-host")
    drain = int(find("ConfigMap", "parley-worker")["data"]["PARLEY_DRAIN_TIMEOUT_S"])
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert drain < grace <= drain + 120, (drain, grace)
    scale_down = find("HorizontalPodAutoscaler", "parley-host")["spec"]["behavior"]["scaleDown"]
    assert scale_down["stabilizationWindowSeconds"] >= 300


def test_autoscaler_follows_the_worker_load_below_the_dispatch_threshold() -> None:
    hpa = find("HorizontalPodAutoscaler", "parley-host")["spec"]
    target = hpa["scaleTargetRef"]
    find(target["kind"], target["name"])
    (metric,) = hpa["metrics"]
    assert metric["pods"]["metric"]["name"] == "lk_agents_worker_load"
    average = metric["pods"]["target"]["averageValue"]
    value = int(average[:-1]) / 1000 if average.endswith("m") else float(average)
    from worker.settings import Settings

    full = Settings().livekit_target_load  # livekit-server's agents.target_load, left at its default
    assert 0 < value < full  # a full host reports exactly the target load (worker.load.compute_load)
    assert hpa["minReplicas"] >= 2


@pytest.mark.parametrize("name", ["parley-host", "livekit-server", "livekit-sip"])
def test_each_replicated_service_has_a_disruption_budget_that_selects_it(name: str) -> None:
    wl = find("Deployment", name)
    pdb = find("PodDisruptionBudget", name)
    assert pdb["metadata"]["namespace"] == wl["metadata"]["namespace"]
    labels = wl["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1


def test_livekit_is_multi_node_on_one_redis() -> None:
    server = find("Deployment", "livekit-server")
    assert server["spec"]["replicas"] >= 2
    config = yaml.safe_load(find("ConfigMap", "livekit-server")["data"]["livekit.yaml"])
    redis_service = find("Service", "livekit-redis")
    assert config["redis"]["address"].startswith(
        f"livekit-redis.{redis_service['metadata']['namespace']}.svc"
    )
    assert "keys" not in config  # keys come from the secret via LIVEKIT_KEYS
    sip = yaml.safe_load(
        next(s for s in SECRETS if s["metadata"]["name"] == "livekit-sip-config")["stringData"]["config.yaml"]
    )
    assert sip["redis"]["address"] == config["redis"]["address"]


@pytest.mark.parametrize("dockerfile", ["Dockerfile.worker", "Dockerfile.engine"])
def test_images_run_as_non_root_with_a_health_check(dockerfile: str) -> None:
    text = (ROOT / "deploy" / dockerfile).read_text()
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.M)
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    assert re.search(r"^HEALTHCHECK .*\n?.*CMD", text, flags=re.M)


def test_no_secret_reaches_a_command_line() -> None:
    """`ps` on the node shows every argv; secret-sourced variables may be used in env, never in args."""
    for wl in workloads():
        for c in containers(wl["spec"]["template"]["spec"]):
            secret_vars = {n for n, e in env_of(c).items() if e.get("valueFrom", {}).get("secretKeyRef")}
            argv = " ".join(c.get("command", []) + c.get("args", []))
            used = set(re.findall(r"\$\(([A-Z_]+)\)", argv))  # Kubernetes expands $(VAR) into argv itself
            assert not used & secret_vars, (c["name"], used & secret_vars)
    redis = next(c for c in find("StatefulSet", "livekit-redis")["spec"]["template"]["spec"]["containers"])
    script = " ".join(redis["args"])
    assert "redis-server -" in script and "requirepass ${REDIS_PASSWORD}" in script  # config on stdin


def test_no_metrics_port_on_the_host_network() -> None:
    for wl in workloads():
        pod = wl["spec"]["template"]
        if not pod["spec"].get("hostNetwork"):
            continue
        assert "prometheus.io/scrape" not in pod["metadata"].get("annotations", {}), wl["metadata"]["name"]
        for c in containers(pod["spec"]):
            assert all(p["name"] != "metrics" for p in c.get("ports", [])), c["name"]
    config = yaml.safe_load(find("ConfigMap", "livekit-server")["data"]["livekit.yaml"])
    assert "prometheus_port" not in config
    sip = next(s for s in SECRETS if s["metadata"]["name"] == "livekit-sip-config")
    assert "prometheus_port" not in yaml.safe_load(sip["stringData"]["config.yaml"])


def test_agent_plane_egress_is_limited_to_what_a_call_needs() -> None:
    policy = find("NetworkPolicy", "parley-host")["spec"]
    assert "Egress" in policy["policyTypes"]
    private = {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}
    for rule in policy["egress"]:
        assert rule.get("ports"), "every egress rule names its ports"
        for peer in rule["to"]:
            block = peer.get("ipBlock")
            if block and block["cidr"] == "0.0.0.0/0":
                # the internet, but not the cluster's private ranges nor the cloud metadata service
                assert private <= set(block.get("except", [])), block


def test_the_speech_engine_is_a_sidecar_sharing_its_socket_with_the_worker() -> None:
    pod = find("Deployment", "parley-host")["spec"]["template"]["spec"]
    engine = next(c for c in pod["initContainers"] if c["name"] == "speech-engine")
    worker = next(c for c in pod["containers"] if c["name"] == "worker")
    assert engine["restartPolicy"] == "Always"
    address = find("ConfigMap", "parley-worker")["data"]["PARLEY_STT_ENGINE_ADDRESS"]
    assert engine["args"][engine["args"].index("--address") + 1] == address
    mount = str(Path(address.removeprefix("unix://")).parent.parent)  # a private folder in the shared volume
    mounts = {c["name"]: {m["name"]: m["mountPath"] for m in c["volumeMounts"]} for c in (engine, worker)}
    assert mounts["speech-engine"]["engine-socket"] == mounts["worker"]["engine-socket"] == mount
    text = (ROOT / "deploy" / "Dockerfile.worker").read_text()
    stages = re.findall(r"^FROM \S+ AS (\S+)", text, flags=re.M)
    assert "speech-engine" in stages and stages[-1] == "worker"  # the worker stays the default build
