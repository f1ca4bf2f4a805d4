"""KubernetesJob: manifests and API calls, checked against a recording API object.

The pods the fake API reports point at real local worker processes, so `state()` attaches to
real hosts; only the Kubernetes API itself is stood in for (no cluster is reachable here).
"""

from __future__ import annotations

import pytest

from monarch._src.job.kubernetes import MESH_LABEL, MeshSpec, mesh_manifest, ready_addresses
from monarch.job.kubernetes import ImageSpec, KubeConfig, KubernetesJob


class RecordingApi:
    """Answers list_pods from a table and records every create/delete."""

    def __init__(self, pods: dict[str, list[dict]]) -> None:
        self.pods = pods
        self.calls: list[tuple] = []

    def list_pods(self, namespace: str, label_selector: str) -> list[dict]:
        self.calls.append(("list_pods", namespace, label_selector))
        return self.pods.get(label_selector, [])

    def create_custom_object(self, namespace: str, body: dict) -> None:
        self.calls.append(("create", namespace, body))

    def delete_custom_object(self, namespace: str, name: str) -> None:
        self.calls.append(("delete", namespace, name))


def pod(name: str, rank: int | str, ip: str | None, phase: str = "Running",
        rank_label: str = "apps.kubernetes.io/pod-index") -> dict:
    return {"metadata": {"name": name, "labels": {rank_label: str(rank)}},
            "status": {"phase": phase, "podIP": ip}}


def test_mesh_manifest_from_image_spec() -> None:
    spec = MeshSpec("trainers", 4, image_spec=ImageSpec("repo/img:1", resources={"cpu": "2"},
                                                        env={"A": "1"}),
                    port=26601, labels={"team": "x"}, annotations={"note": "y"})
    body = mesh_manifest(spec, "ns1")
    assert body["apiVersion"] == "monarch.pytorch.org/v1alpha1"
    assert body["kind"] == "MonarchMesh"
    assert body["metadata"] == {"name": "trainers", "namespace": "ns1",
                                "labels": {MESH_LABEL: "trainers", "team": "x"},
                                "annotations": {"note": "y"}}
    assert body["spec"]["replicas"] == 4 and body["spec"]["port"] == 26601
    template = body["spec"]["podTemplate"]
    assert template["metadata"]["labels"][MESH_LABEL] == "trainers"
    (container,) = template["spec"]["containers"]
    assert container["image"] == "repo/img:1"
    assert container["command"][-1] == "tcp://$(POD_IP):26601"
    assert container["resources"] == {"limits": {"cpu": "2"}}
    assert {"name": "A", "value": "1"} in container["env"]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def test_mesh_manifest_keeps_a_given_pod_template() -> None:
    template = {"spec": {"containers": [{"name": "mine", "image": "i"}]}}
    body = mesh_manifest(MeshSpec("ps", 1, pod_template=template), "ns")
    assert body["spec"]["podTemplate"]["spec"] == template["spec"]
    assert "metadata" not in template  # the caller's template is not modified


def test_ready_addresses_orders_by_rank_and_skips_unready() -> None:
    spec = MeshSpec("w", 3, port=7000)
    pods = [pod("b", 1, "10.0.0.2"), pod("a", 0, "10.0.0.1"), pod("c", 2, None, "Pending")]
    assert ready_addresses(pods, spec) == ["tcp://10.0.0.1:7000", "tcp://10.0.0.2:7000"]
    with pytest.raises(ValueError, match="no integer label 'apps.kubernetes.io/pod-index'"):
        ready_addresses([pod("z", "x", "10.0.0.9")], spec)


def test_add_mesh_errors_are_clear() -> None:
    job = KubernetesJob("ns", api=RecordingApi({}))
    job.add_mesh("a", 1)
    with pytest.raises(ValueError, match="already has a mesh named 'a'"):
        job.add_mesh("a", 2)
    with pytest.raises(ValueError, match="num_replicas >= 1"):
        job.add_mesh("b", 0)
    with pytest.raises(ValueError, match="not both"):
        job.add_mesh("c", 1, image_spec=ImageSpec("i"), pod_template={})
    with pytest.raises(ValueError, match="no meshes"):
        KubernetesJob("ns", api=RecordingApi({})).apply()


def test_kubernetes_package_is_optional() -> None:
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        job = KubernetesJob("ns", kubeconfig=KubeConfig(path="/nonexistent"))
        job.add_mesh("a", 1, image_spec=ImageSpec("i"))
        with pytest.raises(ImportError, match="pip install kubernetes"):
            job.apply()
    else:
        pytest.skip("the kubernetes package is installed here")


@pytest.mark.timeout(120)
def test_kubernetes_job_creates_discovers_attaches_and_deletes(tmp_path, monkeypatch) -> None:
    from monarch.job import ProcessJob

    monkeypatch.chdir(tmp_path)
    # Real worker hosts stand in for the pods' containers.
    workers = ProcessJob({"w": 2})
    workers.apply()
    try:
        addrs = [workers._host_to_pid[f"w_{i}"][1] for i in range(2)]
        ports = [int(a.rsplit(":", 1)[1]) for a in addrs]
        api = RecordingApi({
            f"{MESH_LABEL}=trainers": [pod("t1", 1, "127.0.0.1"), pod("t0", 0, "127.0.0.1")],
            "app=ps": [pod("p0", 0, "127.0.0.1", rank_label="idx")],
        })
        job = KubernetesJob("ml", timeout=30, api=api)
        job.add_mesh("trainers", 2, image_spec=ImageSpec("img"), port=ports[0])
        job.add_mesh("ps", 1, label_selector="app=ps", pod_rank_label="idx", port=ports[1])
        # t0 and t1 share an IP in the fake, so both resolve to the first worker's port; the
        # ps mesh uses the second worker.
        state = job.state(cached_path=None)
        creates = [c for c in api.calls if c[0] == "create"]
        assert [(c[1], c[2]["metadata"]["name"]) for c in creates] == [("ml", "trainers")]
        assert ("list_pods", "ml", "app=ps") in api.calls
        assert state.trainers.sizes == {"hosts": 2} and state.ps.sizes == {"hosts": 1}
        procs = state.ps.spawn_procs()
        assert len(procs) == 1
        procs.stop().get(timeout=60)
        job.kill()
        assert api.calls[-1] == ("delete", "ml", "trainers")
    finally:
        workers.kill()
