"""monarch.job.kubernetes: host meshes from Kubernetes pods (the `kubernetes` package is
optional and imported only when a job first talks to the cluster)."""

from monarch._src.job.kubernetes import ImageSpec, KubeConfig, KubernetesJob

__all__ = ["ImageSpec", "KubeConfig", "KubernetesJob"]
