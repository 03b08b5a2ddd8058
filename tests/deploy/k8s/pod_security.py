"""A restricted-style security scan of pod specs (what `kubesec`/Pod Security "restricted" check).

Rules, each a finding when broken:
- no hostNetwork / hostPID / hostIPC; seccomp RuntimeDefault; no service-account token mounted;
- hostPath volumes only for the socket directory /var/run/lakegate;
- every container: not privileged, allowPrivilegeEscalation false, capabilities drop ALL and add
  nothing, runs as non-root, CPU and memory requests and a memory limit, an image with a pinned
  tag (never `latest`, never untagged);
- the gateway image: read-only root filesystem;
- the gateway itself: liveness on /livez and readiness on /readyz.

One exception, kept narrow on purpose: a (non-sidecar) init container may run as uid 0 when it
drops every capability but CHOWN, cannot escalate and has a read-only root. The DaemonSet needs
exactly that to hand the hostPath socket directory to uid 10001 (kubelet creates it root-owned).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.deploy.manifests import GATEWAY_IMAGE, containers, is_gateway

SOCKET_DIR = "/var/run/lakegate"
ROOT_INIT_CAPS = frozenset({"CHOWN"})

Doc = dict[str, Any]


@dataclass(frozen=True)
class Finding:
    """One broken rule: `rule` is stable (tests match on it), `where` names the container."""

    rule: str
    where: str


def scan_pod(spec: Doc, name: str) -> list[Finding]:
    """Every finding for one pod spec; `name` prefixes `where` so reports point at the file."""
    out: list[Finding] = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(Finding(field, name))
    if spec.get("automountServiceAccountToken") is not False:
        out.append(Finding("automountServiceAccountToken", name))
    pod_ctx = spec.get("securityContext") or {}
    for vol in spec.get("volumes") or []:
        host = vol.get("hostPath")
        if host is not None and host.get("path") != SOCKET_DIR:
            out.append(Finding("hostPath", f"{name}/volumes/{vol.get('name')}"))
    for field, c in containers(spec):
        out.extend(_scan_container(c, field, pod_ctx, f"{name}/{field}/{c.get('name')}"))
    return out


def _baseline_container(ctx: Doc, caps: Doc, where: str) -> list[Finding]:
    """What every profile we check asks of a container: not privileged, no escalation, and
    all capabilities dropped."""
    out: list[Finding] = []
    if ctx.get("privileged"):
        out.append(Finding("privileged", where))
    if ctx.get("allowPrivilegeEscalation") is not False:
        out.append(Finding("allowPrivilegeEscalation", where))
    if "ALL" not in (caps.get("drop") or []):
        out.append(Finding("capabilities.drop", where))
    return out


def _scan_container(c: Doc, field: str, pod_ctx: Doc, where: str) -> list[Finding]:
    out: list[Finding] = []
    ctx = c.get("securityContext") or {}
    caps = ctx.get("capabilities") or {}
    added = frozenset(caps.get("add") or [])
    out += _baseline_container(ctx, caps, where)
    root_init = (
        field == "initContainers"
        and c.get("restartPolicy") != "Always"
        and added <= ROOT_INIT_CAPS
        and ctx.get("readOnlyRootFilesystem") is True
        and ctx.get("allowPrivilegeEscalation") is False
    )
    if added and not (root_init and added <= ROOT_INIT_CAPS):
        out.append(Finding("capabilities.add", where))
    if not root_init and not _runs_as_non_root(ctx, pod_ctx):
        out.append(Finding("runAsNonRoot", where))
    seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
    if seccomp not in {"RuntimeDefault", "Localhost"}:
        out.append(Finding("seccompProfile", where))
    res = c.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    if not {"cpu", "memory"} <= requests.keys() or "memory" not in limits:
        out.append(Finding("resources", where))
    image = str(c.get("image", ""))
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    if "@sha256:" not in image and tag in {"", "latest"}:
        out.append(Finding("image.tag", where))
    if image.split("@")[0].split(":")[0].endswith(GATEWAY_IMAGE) and (
        ctx.get("readOnlyRootFilesystem") is not True
    ):
        out.append(Finding("readOnlyRootFilesystem", where))
    if is_gateway(c):
        if _probe_path(c.get("livenessProbe")) != "/livez":
            out.append(Finding("livenessProbe", where))
        if _probe_path(c.get("readinessProbe")) != "/readyz":
            out.append(Finding("readinessProbe", where))
    return out


def _runs_as_non_root(ctx: Doc, pod_ctx: Doc) -> bool:
    user = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
    if user == 0:
        return False
    return bool(ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")))


def _probe_path(probe: Doc | None) -> str | None:
    """The HTTP path a probe checks: httpGet's path, or the loopback URL inside an exec probe."""
    if not probe:
        return None
    if "httpGet" in probe:
        return str(probe["httpGet"].get("path"))
    command = " ".join((probe.get("exec") or {}).get("command") or [])
    for path in ("/livez", "/readyz"):
        if f"127.0.0.1:8765{path}" in command:
            return path
    return None


# --- Pod Security Standards "restricted" (what a namespace labelled enforce=restricted admits) --

RESTRICTED_VOLUMES = frozenset(
    {
        "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
        "persistentVolumeClaim", "projected", "secret",
    }
)
RESTRICTED_ADD_CAPS = frozenset({"NET_BIND_SERVICE"})
_VOLUME_META = frozenset({"name"})


def scan_restricted(spec: Doc, name: str) -> list[Finding]:
    """Every violation of the Kubernetes "restricted" Pod Security Standard (v1.30 profile).

    Stricter than `scan_pod` where the standard is: no hostPath at all and no root init step.
    """
    out: list[Finding] = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(Finding(field, name))
    pod_ctx = spec.get("securityContext") or {}
    for vol in spec.get("volumes") or []:
        kinds = set(vol) - _VOLUME_META
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(Finding("volumeType", f"{name}/volumes/{vol.get('name')}"))
    if (pod_ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append(Finding("seccompProfile", name))
    if pod_ctx.get("runAsUser") == 0:
        out.append(Finding("runAsUser", name))
    if pod_ctx.get("sysctls"):
        out.append(Finding("sysctls", name))
    ephemeral = [("ephemeralContainers", c) for c in spec.get("ephemeralContainers") or []]
    for field, c in [*containers(spec), *ephemeral]:
        out.extend(_restricted_container(c, pod_ctx, f"{name}/{field}/{c.get('name')}"))
    return out


def _restricted_container(c: Doc, pod_ctx: Doc, where: str) -> list[Finding]:
    out: list[Finding] = []
    ctx = c.get("securityContext") or {}
    caps = ctx.get("capabilities") or {}
    out += _baseline_container(ctx, caps, where)
    if not frozenset(caps.get("add") or []) <= RESTRICTED_ADD_CAPS:
        out.append(Finding("capabilities.add", where))
    if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
        out.append(Finding("runAsNonRoot", where))
    if ctx.get("runAsUser") == 0:
        out.append(Finding("runAsUser", where))
    seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
    if seccomp not in {"RuntimeDefault", "Localhost"}:
        out.append(Finding("seccompProfile", where))
    if any(p.get("hostPort") for p in c.get("ports") or []):
        out.append(Finding("hostPort", where))
    if ctx.get("procMount", "Default") != "Default":
        out.append(Finding("procMount", where))
    return out
