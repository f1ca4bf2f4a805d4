"""`KubernetesJob`: host meshes made of Kubernetes pods, each running a monarch worker.

A mesh is either pre-provisioned pods found by a label selector (ranked by the
`pod_rank_label` label, as a StatefulSet or indexed Job sets it), or a `MonarchMesh` custom
resource this job creates from an `ImageSpec` or a pod template (an operator turns it into
pods carrying the same labels). Either way the job waits for `num_replicas` running pods with
an IP and attaches to `tcp://<pod ip>:<port>`.

Everything that talks to the cluster goes through a `KubeApi` object (`_api`): the default one
wraps the optional `kubernetes` package, imported only when a job first needs the cluster;
tests pass their own object and check the manifests and calls.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from monarch._src.job.blocking import shutdown_quietly
from monarch._src.job.job import JobTrait
from monarch._src.job.state import JobState
from monarch._src.lowlevel import Progress

__all__ = ["ImageSpec", "KubeApi", "KubeConfig", "KubernetesJob", "MeshSpec"]

# The MonarchMesh custom resource.
CRD_GROUP = "monarch.pytorch.org"
CRD_VERSION = "v1alpha1"
CRD_PLURAL = "monarchmeshes"
CRD_KIND = "MonarchMesh"
# Label every pod of a mesh carries (and that the default selector uses).
MESH_LABEL = "monarch.pytorch.org/mesh-name"
# Default bound on pods becoming ready.
_DEFAULT_TIMEOUT = 600.0


@dataclass
class ImageSpec:
    """The container of a created mesh's pods: image, resources (limits) and environment."""

    image: str
    resources: dict[str, Any] | None = None
    env: dict[str, str] | None = None


@dataclass
class KubeConfig:
    """How to reach the cluster: a kubeconfig file and context, or the in-cluster account."""

    path: str | None = None
    context: str | None = None
    in_cluster: bool = False


class KubeApi(Protocol):
    """The calls `KubernetesJob` makes; objects are plain dicts as the API returns them."""

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The pods of `namespace` matching `label_selector`."""
        ...

    def create_custom_object(self, namespace: str, body: dict[str, Any]) -> None:
        """Create the `MonarchMesh` resource `body` in `namespace`."""
        ...

    def delete_custom_object(self, namespace: str, name: str) -> None:
        """Delete the `MonarchMesh` resource `name` of `namespace`."""
        ...


class _KubernetesClient:
    """`KubeApi` over the `kubernetes` package (imported here, lazily)."""

    def __init__(self, config: KubeConfig | None) -> None:
        try:
            import kubernetes  # type: ignore[import-not-found]
        except ImportError:
            raise ImportError(
                "KubernetesJob needs the `kubernetes` package to reach a cluster. Install it "
                "with `pip install kubernetes`."
            ) from None
        config = config or KubeConfig()
        if config.in_cluster:
            kubernetes.config.load_incluster_config()
        else:
            kubernetes.config.load_kube_config(config_file=config.path, context=config.context)
        self._core = kubernetes.client.CoreV1Api()
        self._custom = kubernetes.client.CustomObjectsApi()
        self._to_dict = kubernetes.client.ApiClient().sanitize_for_serialization

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The pods of `namespace` matching `label_selector`, as dicts."""
        pods = self._core.list_namespaced_pod(namespace, label_selector=label_selector)
        return list(self._to_dict(pods).get("items", []))

    def create_custom_object(self, namespace: str, body: dict[str, Any]) -> None:
        """Create the `MonarchMesh` resource `body`."""
        self._custom.create_namespaced_custom_object(
            CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, body)

    def delete_custom_object(self, namespace: str, name: str) -> None:
        """Delete the `MonarchMesh` resource `name`."""
        self._custom.delete_namespaced_custom_object(
            CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, name)


@dataclass
class MeshSpec:
    """One mesh of a `KubernetesJob` (see `KubernetesJob.add_mesh`)."""

    name: str
    num_replicas: int
    label_selector: str | None = None
    pod_rank_label: str = "apps.kubernetes.io/pod-index"
    image_spec: ImageSpec | None = None
    port: int = 26600
    pod_template: dict[str, Any] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def creates(self) -> bool:
        """Whether the job creates this mesh (else it finds existing pods)."""
        return self.image_spec is not None or self.pod_template is not None

    @property
    def selector(self) -> str:
        """The label selector of this mesh's pods."""
        return self.label_selector or f"{MESH_LABEL}={self.name}"


def worker_container(spec: MeshSpec) -> dict[str, Any]:
    """The worker container of a created mesh: `monarch worker` on the pod's IP and `port`."""
    assert spec.image_spec is not None
    env = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    env += [{"name": k, "value": v} for k, v in sorted((spec.image_spec.env or {}).items())]
    container: dict[str, Any] = {
        "name": "worker",
        "image": spec.image_spec.image,
        "command": ["python", "-m", "monarch._src.job.worker_main",
                    f"tcp://$(POD_IP):{spec.port}"],
        "env": env,
        "ports": [{"containerPort": spec.port, "name": "monarch"}],
    }
    if spec.image_spec.resources:
        container["resources"] = {"limits": dict(spec.image_spec.resources)}
    return container


def mesh_manifest(spec: MeshSpec, namespace: str) -> dict[str, Any]:
    """The `MonarchMesh` custom resource that asks the operator for `spec`'s pods."""
    if spec.pod_template is not None:
        template = copy.deepcopy(spec.pod_template)
    else:
        template = {"spec": {"containers": [worker_container(spec)]}}
    meta = template.setdefault("metadata", {})
    meta.setdefault("labels", {}).update({MESH_LABEL: spec.name, **spec.labels})
    return {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": CRD_KIND,
        "metadata": {
            "name": spec.name,
            "namespace": namespace,
            "labels": {MESH_LABEL: spec.name, **spec.labels},
            "annotations": dict(spec.annotations),
        },
        "spec": {"replicas": spec.num_replicas, "port": spec.port, "podTemplate": template},
    }


def ready_addresses(pods: list[dict[str, Any]], spec: MeshSpec) -> list[str]:
    """Worker addresses of the running pods with an IP, ordered by their rank label."""
    ranked: list[tuple[int, str]] = []
    for pod in pods:
        status = pod.get("status") or {}
        ip = status.get("podIP") or status.get("pod_ip")
        if status.get("phase") != "Running" or not ip:
            continue
        labels = (pod.get("metadata") or {}).get("labels") or {}
        try:
            rank = int(labels[spec.pod_rank_label])
        except (KeyError, ValueError):
            name = (pod.get("metadata") or {}).get("name", "?")
            raise ValueError(
                f"KubernetesJob mesh {spec.name!r}: pod {name} has no integer label "
                f"{spec.pod_rank_label!r}. Set pod_rank_label to the label that ranks pods."
            ) from None
        ranked.append((rank, f"tcp://{ip}:{spec.port}"))
    return [addr for _, addr in sorted(ranked)]


class KubernetesJob(JobTrait):
    """Host meshes from Kubernetes pods: `KubernetesJob("ns").add_mesh("trainers", 4, ...)`."""

    _live_api: KubeApi | None

    def __init__(self, namespace: str, timeout: float | None = None,
                 kubeconfig: KubeConfig | None = None, attach_to: str | None = None,
                 api: KubeApi | None = None) -> None:
        super().__init__()
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"KubernetesJob needs a namespace name, got {namespace!r}.")
        self._namespace = namespace
        self._timeout = timeout or _DEFAULT_TIMEOUT
        self._kubeconfig = kubeconfig
        if attach_to is not None:
            from monarch._src.hosts.addresses import parse_worker_address

            parse_worker_address(attach_to, what="KubernetesJob(attach_to=...)")
        # A forwarded address (`kubectl port-forward pod/<pod> <local>:26600`) that reaches the
        # job's one pod from outside the cluster; used instead of the pod's own address.
        self._attach_to = attach_to
        self._meshes: dict[str, MeshSpec] = {}
        self._created: list[str] = []  # MonarchMesh resources this job created
        self._init_live()
        if api is not None:
            self._live_api = api

    def _init_live(self) -> None:
        self._live_api = None  # built from the kubeconfig on first use
        self._live_hosts: dict[str, Any] = {}  # HostMeshes attached in this process

    def add_mesh(self, name: str, num_replicas: int, label_selector: str | None = None,
                 pod_rank_label: str = "apps.kubernetes.io/pod-index",
                 image_spec: ImageSpec | None = None, port: int = 26600,
                 pod_template: dict[str, Any] | None = None,
                 labels: dict[str, str] | None = None,
                 annotations: dict[str, str] | None = None) -> KubernetesJob:
        """Declare a mesh of `num_replicas` pods; returns the job (calls chain)."""
        if name in self._meshes:
            raise ValueError(f"KubernetesJob already has a mesh named {name!r}.")
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(
                f"KubernetesJob mesh {name!r} needs num_replicas >= 1, got {num_replicas!r}.")
        if image_spec is not None and pod_template is not None:
            raise ValueError(
                f"KubernetesJob mesh {name!r}: give image_spec or pod_template, not both.")
        self._meshes[name] = MeshSpec(name, num_replicas, label_selector, pod_rank_label,
                                      image_spec, port, pod_template, dict(labels or {}),
                                      dict(annotations or {}))
        return self

    @property
    def meshes(self) -> dict[str, MeshSpec]:
        """The declared meshes by name."""
        return dict(self._meshes)

    def _api(self) -> KubeApi:
        if self._live_api is None:
            self._live_api = _KubernetesClient(self._kubeconfig)
        return self._live_api

    def can_run(self, spec: JobTrait) -> bool:
        """True for a spec with the same namespace and meshes whose pods are all still up."""
        if not (isinstance(spec, KubernetesJob) and spec._namespace == self._namespace
                and spec._meshes == self._meshes):
            return False
        api = self._api()
        return all(
            len(ready_addresses(api.list_pods(self._namespace, m.selector), m)) >= m.num_replicas
            for m in self._meshes.values()
        )

    def _create(self, client_script: str | None) -> None:
        if client_script is not None:
            raise NotImplementedError(
                "KubernetesJob does not support batch mode (apply(client_script)). Run the "
                "client in a pod of its own that can reach the workers.")
        if not self._meshes:
            raise ValueError("KubernetesJob has no meshes. Call add_mesh(...) before apply().")
        api = self._api()
        for spec in self._meshes.values():
            if spec.creates and spec.name not in self._created:
                api.create_custom_object(self._namespace, mesh_manifest(spec, self._namespace))
                self._created.append(spec.name)

    def _addresses(self) -> dict[str, list[str]]:
        api = self._api()
        total = sum(m.num_replicas for m in self._meshes.values())
        deadline = time.monotonic() + self._timeout
        with Progress(f"pods in namespace {self._namespace}", total) as progress:
            while True:
                found = {
                    name: ready_addresses(api.list_pods(self._namespace, m.selector), m)
                    for name, m in self._meshes.items()
                }
                ready = sum(min(len(found[n]), m.num_replicas) for n, m in self._meshes.items())
                progress.update(ready)
                if ready == total:
                    progress.close(detail="pods running")
                    return {n: found[n][: m.num_replicas] for n, m in self._meshes.items()}
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"KubernetesJob: {ready} of {total} pods running in namespace "
                        f"{self._namespace} after {self._timeout:.0f}s. Check `kubectl get "
                        "pods`.")
                time.sleep(1.0)

    def _state(self) -> JobState:
        if not self._live_hosts:
            from monarch._src.job.attach import attach_job_workers

            found = self._addresses()
            if self._attach_to is not None:
                found = self._through_attach_to(found)
            for name, addresses in found.items():
                self._live_hosts[name] = attach_job_workers(addresses, name)
        return JobState({n: self._live_hosts[n] for n in self._meshes})

    def _through_attach_to(self, found: dict[str, list[str]]) -> dict[str, list[str]]:
        """attach_to reaches one pod (a port-forward goes to one pod): the job must have
        exactly one; its mesh is attached through that address."""
        attach_to = self._attach_to
        if attach_to is None:  # nothing to go through
            return found
        pods = sum(len(addresses) for addresses in found.values())
        if pods != 1:
            raise ValueError(
                f"KubernetesJob(attach_to={attach_to!r}) reaches a single pod, but this "
                f"job has {pods} pods ({', '.join(f'{n}: {len(a)}' for n, a in found.items())}). "
                "Run the client inside the cluster (without attach_to), or make the pods' "
                "addresses routable from here."
            )
        return {name: [attach_to] if addresses else [] for name, addresses in found.items()}

    def _kill(self) -> None:
        shutdown_quietly(self._live_hosts.values())
        self._live_hosts = {}
        api = self._api()
        for name in self._created:
            api.delete_custom_object(self._namespace, name)
        self._created = []
