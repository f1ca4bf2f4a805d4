"""The mesh admin HTTP API over real procs and real HTTP (urllib): every route, the token,
failure introspection, hang triage (`/v1/why`, `monarch why` in a subprocess) and
`job.enable_admin()`."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FaultRecorder
from tests.debug.actors import Crashing, Paused
from tests.debug.hang_actors import Releaser, Trainer

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The admin URL of this test process (its control server, started once per process), and
    the directory where it published itself."""
    from monarch._src.actor.host_mesh import _spawn_admin
    from monarch._src.admin.server import ControlServer
    from monarch.actor import this_host

    here = os.getcwd()
    cwd = tmp_path_factory.mktemp("admin")
    os.chdir(cwd)  # the published .monarch/controller-<pid>.json lands here
    try:
        running = ControlServer.running()
        url, ref = _spawn_admin([this_host()], admin_addr="127.0.0.1:0").get(timeout=30)
        # One control server per process: an earlier test's (a job's enable_admin) is reused.
        assert url == ref.url
        assert url == running.url if running is not None else url.startswith("http://127.0.0.1:")
        published = Path(running.path).parent if running is not None else cwd / ".monarch"
        yield url, published.parent
    finally:
        os.chdir(here)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
    req = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=30) as resp:
            status, ctype, body = resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as exc:
        with exc:
            status, ctype, body = exc.code, exc.headers["Content-Type"], exc.read()
    return status, ctype, json.loads(body) if ctype == "application/json" else body.decode()


def _node(base: str, ref: str) -> dict[str, Any]:
    status, _, payload = _get(f"{base}/v1/{urllib.parse.quote(ref, safe='')}")
    assert status == 200, payload
    assert payload["identity"] == ref
    return payload  # type: ignore[no-any-return]


def _wait_for(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll a condition (a remote state this process cannot be told about) until a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)  # poll interval of a bounded condition wait


def _procs_of_mesh(base: str, mesh: str) -> list[dict[str, Any]]:
    found = []
    for host in _node(base, "root")["children"]:
        for proc_ref in _node(base, host)["children"]:
            proc = _node(base, proc_ref)
            if any(f"{mesh}-" in child for child in proc["children"]):
                found.append(proc)
    return found


def _failing(base: str) -> set[str]:
    """The refs that `/v1/health` reports failing now: what earlier tests of this process left
    failed (on the shared procs) stays there, and a test compares against it."""
    status, _, health = _get(f"{base}/v1/health")
    assert status == 200
    return {c["ref"] for c in health["checks"] if c["status"] == "fail"}


def test_admin_api_walks_root_hosts_procs_actors(admin: tuple[str, Path]) -> None:
    from monarch.actor import this_host

    base, _ = admin
    # Procs of its own: a proc the shared ones lost an actor on is poisoned for the session.
    own = this_host().spawn_procs(per_host={"gpus": 2}, name="walkprocs")
    mesh = own.spawn("walked", Paused)
    try:
        mesh.ping.call().get(timeout=30)
        root = _node(base, "root")
        assert root["parent"] is None and root["properties"]["Root"]["num_hosts"] >= 1
        host = _node(base, root["children"][0])
        assert host["parent"] == "root" and host["properties"]["Host"]["num_procs"] >= 3
        procs = _procs_of_mesh(base, "walked")
        assert len(procs) == 2
        for proc in procs:
            props = proc["properties"]["Proc"]
            assert props["state"] == "running" and props["reachable"] is True
            assert props["is_poisoned"] is False and props["failed_actor_count"] == 0
            (actor_ref,) = [c for c in proc["children"] if "walked-" in c]
            actor = _node(base, actor_ref)
            assert actor["parent"] == proc["identity"]
            aprops = actor["properties"]["Actor"]
            assert aprops["actor_status"] == "idle" and aprops["failure_info"] is None
            assert aprops["actor_type"] == "tests.debug.actors.Paused"
            assert aprops["execution"]["active_count"] == 0 and aprops["mesh"] == "walked"
    finally:
        own.stop().get(timeout=30)


def test_every_route_answers_in_its_shape(admin: tuple[str, Path], procs2: Any) -> None:
    base, _ = admin
    before = _failing(base)
    mesh = procs2.spawn("routed", Paused)
    try:
        mesh.ping.call().get(timeout=30)
        status, ctype, info = _get(f"{base}/v1/admin")
        assert status == 200 and info["url"] == base and info["proc_id"].startswith("client-")
        status, ctype, tree = _get(f"{base}/v1/tree")
        assert status == 200 and ctype.startswith("text/plain")
        assert "routed[0]  ->  " + base in tree and "routed[1]" in tree
        status, ctype, skill = _get(f"{base}/SKILL.md")
        assert status == 200 and ctype.startswith("text/markdown")
        assert f"Base URL: `{base}`" in skill and "/v1/why" in skill
        status, _, health = _get(f"{base}/v1/health")
        checks = [c for c in health["checks"] if c["ref"] not in before]
        failing = [c for c in checks if c["status"] == "fail"]
        assert status == 200 and not failing, failing
        assert health["healthy"] is (not before)
        kinds = {c["kind"] for c in checks}
        assert kinds == {"root", "host", "proc", "actor"}
        assert all(c["status"] in ("pass", "slow") for c in checks)
        status, _, snap = _get(f"{base}/v1/snapshot")
        assert status == 200 and any(a["mesh"] == "routed" for a in snap["actors"])
        proc_ref = _procs_of_mesh(base, "routed")[0]["identity"]
        quoted = urllib.parse.quote(proc_ref, safe="")
        status, _, dump = _get(f"{base}/v1/stacks/{quoted}?no_py_spy=1")
        assert status == 200 and "Thread" in dump["python"] and dump["py_spy"] is None
        status, _, dump = _get(f"{base}/v1/stacks?mesh=routed&rank=1&no_py_spy=1")
        assert status == 200 and "actor <root>.<tests.debug.actors.Paused routed" in \
            dump["python"]
        status, _, spy = _get(f"{base}/v1/pyspy/{quoted}")
        assert status == 200 and set(spy) <= {"Ok", "BinaryNotFound", "Failed"}
        if "Ok" in spy:
            assert spy["Ok"]["stack_traces"] and spy["Ok"]["pid"] > 0
        status, _, why = _get(f"{base}/v1/why")
        assert status == 200 and {"summary", "meshes", "unreachable", "failed"} <= set(why)
        # Errors: Monarch's envelope and codes.
        status, _, err = _get(f"{base}/v1/{urllib.parse.quote('nosuch@tcp://x:1', safe='')}")
        assert status == 404 and err["error"]["code"] == "not_found"
        status, _, err = _get(f"{base}/v1/stacks?mesh=ghost&rank=0")
        assert status == 404 and "No mesh named 'ghost'" in err["error"]["message"]
        status, _, err = _get(f"{base}/v1/openapi.json")
        assert status == 404 and "not served by this implementation" in err["error"]["message"]
        post = urllib.request.Request(f"{base}/v1/query", data=b'{"sql": "SELECT 1"}',
                                      method="POST")
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(post, timeout=30)
        assert raised.value.code == 404
        raised.value.close()
    finally:
        mesh.stop().get(timeout=30)


def test_requests_without_the_token_are_refused_and_logged(
        admin: tuple[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    base, _ = admin
    parts = urllib.parse.urlsplit(base)
    token = parts.path.strip("/")
    bare = f"{parts.scheme}://{parts.netloc}"
    with caplog.at_level(logging.WARNING, logger="monarch._src.admin.http"):
        status, _, err = _get(f"{bare}/v1/root")
        assert status == 401 and err["error"]["code"] == "unauthorized"
        status, _, err = _get(f"{bare}/{'0' * 64}/v1/root")
        assert status == 401
        status, _, err = _get(f"{bare}/v1/root", {"Authorization": "Bearer " + "f" * 64})
        assert status == 401
    assert caplog.text.count("refused an admin HTTP request from") == 3
    status, _, root = _get(f"{bare}/v1/root", {"Authorization": f"Bearer {token}"})
    assert status == 200 and root["identity"] == "root"


def test_failed_actor_has_failure_info_and_its_proc_is_poisoned(
        admin: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import monarch.actor
    from monarch.actor import this_host

    base, _ = admin
    recorder = FaultRecorder()
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", recorder)
    before = _failing(base)
    procs = this_host().spawn_procs(per_host={"gpus": 2}, name="poisoned")
    try:
        mesh = procs.spawn("crashy", Crashing)
        mesh.ping.call().get(timeout=30)
        mesh.slice(gpus=1).crash.broadcast()
        recorder.wait_for(1)
        procs_seen = _procs_of_mesh(base, "crashy")
        poisoned = [p for p in procs_seen if p["properties"]["Proc"]["is_poisoned"]]
        healthy = [p for p in procs_seen if not p["properties"]["Proc"]["is_poisoned"]]
        assert len(poisoned) == 1 and len(healthy) == 1
        props = poisoned[0]["properties"]["Proc"]
        assert props["failed_actor_count"] == 1
        (stopped,) = props["stopped_children"]
        actor = _node(base, stopped)["properties"]["Actor"]
        assert actor["actor_status"].startswith("failed: ")
        info = actor["failure_info"]
        assert "crashed on purpose" in info["error_message"]
        assert info["root_cause_actor"] == stopped and info["occurred_at"].endswith("Z")
        assert info["is_propagated"] is False
        status, _, health = _get(f"{base}/v1/health")
        failing = [c for c in health["checks"] if c["status"] == "fail"]
        assert status == 200 and health["healthy"] is False
        assert [c["ref"] for c in failing if c["ref"] not in before] == [stopped]
    finally:
        procs.stop().get(timeout=30)


def _hung(procs4: Any) -> tuple[Any, Any, Any]:
    """Four trainer ranks blocked: three in all_reduce, rank 2 in load_batch."""
    releaser = procs4.spawn("releaser", Releaser)
    releaser.reset.call().get(timeout=30)
    trainer = procs4.spawn("trainer", Trainer)
    pending = trainer.step.call(2)
    return trainer, releaser, pending


def _all_busy(triage: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    def busy() -> dict[str, Any] | None:
        result = triage()
        meshes = [m for m in result["meshes"] if m["mesh"] == "trainer"]
        stacked = meshes and sum(g["count"] for g in meshes[0]["groups"]
                                 if g["kind"] == "stack") == 4
        return result if stacked else None

    return _wait_for(busy, "all four trainer ranks to block")  # type: ignore[no-any-return]


def test_why_groups_ranks_and_names_the_outlier(admin: tuple[str, Path], procs4: Any) -> None:
    from monarch._src.admin.why import format_triage, triage

    base, _ = admin
    trainer, releaser, pending = _hung(procs4)
    try:
        result = _all_busy(triage)
        (mesh,) = [m for m in result["meshes"] if m["mesh"] == "trainer"]
        first, second = mesh["groups"]
        assert (first["where"], first["ranks"], first["outlier"]) == ("all_reduce", [0, 1, 3],
                                                                     False)
        assert (second["where"], second["ranks"], second["outlier"]) == ("load_batch", [2], True)
        assert first["methods"] == ["step"] and second["max_age_s"] >= 0
        assert "3 ranks of trainer in `all_reduce`" in result["summary"]
        assert "rank 2 of trainer in `load_batch` for" in result["summary"]
        assert any("in load_batch" in line for line in second["stack"])
        text = format_triage(result)
        assert "! rank 2 of trainer in `load_batch`" in text
        # The same over HTTP, and the in-flight call on the actor's node.
        status, _, over_http = _get(f"{base}/v1/why")
        assert status == 200 and "rank 2 of trainer in `load_batch`" in over_http["summary"]
        (proc,) = [p for p in _procs_of_mesh(base, "trainer")
                   if p["properties"]["Proc"]["rank"] == 2]
        (ref,) = [c for c in proc["children"] if c.startswith("trainer-")]
        actor = _node(base, ref)["properties"]["Actor"]
        assert actor["actor_status"] == "processing"
        (handler,) = actor["execution"]["active_handlers"]
        assert handler["name"] == "step" and handler["oldest_since"].endswith("Z")
    finally:
        releaser.release.call().get(timeout=30)
        assert sorted(v for _, v in pending.get(timeout=30).items()) == [0, 1, 2, 3]
        trainer.stop().get(timeout=30)
        releaser.stop().get(timeout=30)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("MONARCH_DEBUG_SERVER_PORT", None)
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=60)


def test_monarch_why_in_a_subprocess_names_the_outlier(admin: tuple[str, Path],
                                                       procs4: Any) -> None:
    from monarch._src.admin.why import triage

    base, published_in = admin
    trainer, releaser, pending = _hung(procs4)
    try:
        _all_busy(triage)
        by_url = _cli(["monarch.tools.commands.why", "--url", base], REPO)
        assert by_url.returncode == 0, by_url.stderr
        assert "rank 2 of trainer in `load_batch`" in by_url.stdout
        assert "3 ranks of trainer in `all_reduce`" in by_url.stdout
        # Found from the published file, as `monarch top` finds its client.
        found = _cli(["monarch.tools.commands.why", "--json"], published_in)
        assert found.returncode == 0, found.stderr
        assert "rank 2 of trainer in `load_batch`" in json.loads(found.stdout)["summary"]
        parts = urllib.parse.urlsplit(base)
        refused = _cli(["monarch.tools.commands.why", "--url",
                        f"{parts.scheme}://{parts.netloc}/{'0' * 64}"], REPO)
        assert refused.returncode == 1 and "the token is not the one it expects" in \
            refused.stderr
    finally:
        releaser.release.call().get(timeout=30)
        pending.get(timeout=30)
        trainer.stop().get(timeout=30)
        releaser.stop().get(timeout=30)


def test_enable_admin_sets_admin_url_and_refuses_bad_settings(admin: tuple[str, Path]) -> None:
    from monarch.job import LocalJob, MeshAdminConfig

    base, _ = admin
    with pytest.raises(ValueError, match=r"MeshAdminConfig.admin_addr must be 'host:port'"):
        MeshAdminConfig(admin_addr="nope")
    with pytest.raises(TypeError, match=r"enable_admin got unknown settings \['bogus'\]"):
        LocalJob(("hosts",)).enable_admin(bogus=1)
    with pytest.raises(TypeError, match=r"expected a MeshAdminConfig, got dict"):
        LocalJob(("hosts",)).enable_admin({"admin_addr": ":0"})  # type: ignore[arg-type]
    job = LocalJob(("hosts",)).enable_admin()
    state = job.state(cached_path=None)
    try:
        assert state.admin_url == base  # one admin API per client process
        status, _, root = _get(f"{state.admin_url}/v1/root")
        assert status == 200 and root["children"]
    finally:
        job.kill()
