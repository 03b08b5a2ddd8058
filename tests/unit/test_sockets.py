"""Socket modes at bind time and socket directories (issue #28, finding 4)."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.sockets import StartupError, clear_stale_uds, uds_socket
from tests.unit.app_harness import app_for, running, settings_for
from tests.unit.surfaces.fake_operations import FakeOperations


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The worst start-up environment: umask 000 (process-wide; restored after)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def modes_before_chmod(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Each socket's mode just before the gateway opens it to the group: the window in which
    another user could connect."""
    seen: dict[str, int] = {}
    real = os.chmod

    def chmod(path: object, mode: int, *args: object, **kwargs: object) -> None:
        p = Path(str(path))
        if p.is_socket():
            seen[p.name] = stat.S_IMODE(p.stat().st_mode)
        real(path, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "chmod", chmod)
    return seen


@pytest.mark.usefixtures("open_umask")
def test_a_socket_is_never_open_to_others_before_its_chmod(
    tmp_path: Path, modes_before_chmod: dict[str, int]
) -> None:
    sock = uds_socket(tmp_path / "http.sock", "SETTING")
    try:
        assert modes_before_chmod == {"http.sock": 0o600}
        assert stat.S_IMODE((tmp_path / "http.sock").stat().st_mode) == 0o660
    finally:
        sock.close()
    assert os.umask(0) == 0  # restored


@pytest.mark.usefixtures("open_umask")
async def test_both_daemon_sockets_are_born_owner_only(
    tmp_path: Path, fake_ops: FakeOperations, modes_before_chmod: dict[str, int]
) -> None:
    async with running(app_for(settings_for(tmp_path), fake_ops)):
        assert modes_before_chmod == {"http.sock": 0o600, "grpc.sock": 0o600}
        for name in ("http.sock", "grpc.sock"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o660


@pytest.mark.usefixtures("open_umask")
def test_a_socket_directory_is_created_0750(tmp_path: Path) -> None:
    clear_stale_uds(tmp_path / "run" / "lakegate" / "http.sock")
    assert stat.S_IMODE((tmp_path / "run" / "lakegate").stat().st_mode) == 0o750


def test_a_world_writable_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # noqa: S103 - the unsafe directory under test
    if os.geteuid() == 0:
        os.chown(shared, 65534, 65534)  # nobody
    else:
        pytest.skip("needs root to give the directory to another user")
    with pytest.raises(StartupError, match="writable by every user"):
        uds_socket(shared / "http.sock", "SETTING")
    assert not (shared / "http.sock").exists()


def test_a_world_writable_directory_of_our_own_is_used(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    os.chmod(own, 0o777)  # noqa: S103 - the unsafe directory under test
    sock = uds_socket(own / "http.sock", "SETTING")
    sock.close()


def test_a_live_socket_is_not_replaced(tmp_path: Path) -> None:
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(tmp_path / "http.sock"))
    live.listen()
    try:
        with pytest.raises(StartupError, match="another server"):
            uds_socket(tmp_path / "http.sock", "SETTING")
    finally:
        live.close()
