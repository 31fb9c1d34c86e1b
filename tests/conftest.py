"""Shared pytest fixtures.

Prefect isolation happens at import time, before any test module imports prefect:
a throwaway ``PREFECT_HOME`` and an empty ``PREFECT_API_URL`` (environment variables
beat a stray ``.env`` or a user profile, so tests never talk to a real server or
write into ``~/.prefect``), and no analytics. TensorFlow's C++ warnings are off
(``TF_CPP_MIN_LOG_LEVEL=2``, unless set): the reason is beside the setting.

``TRAINWISE_HOME`` and ``TRAINWISE_RUNS`` point at a temporary folder for the whole session
(``_isolated_trainwise_home``, autouse), so no test reads or writes the checkout's caches.
``aws_isolated_env`` leaves boto3 nothing of the machine's AWS setup: no credential, profile,
role, web-identity, endpoint or proxy variable, and empty config and credentials files.

The Prefect test server (``prefect_harness``) is session-scoped and *not* autouse:
only the Prefect tests request it (through ``prefect_workspace``), so the rest of
the suite does not pay its 10-25 s start-up.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.tf_compat import import_triton_before_tensorflow

_PREFECT_HOME = Path(tempfile.mkdtemp(prefix="trainwise-tests-prefect-home-"))
os.environ["PREFECT_HOME"] = str(_PREFECT_HOME)
os.environ["PREFECT_PROFILES_PATH"] = str(_PREFECT_HOME / "profiles.toml")
os.environ["PREFECT_API_URL"] = ""
os.environ["PREFECT_API_KEY"] = ""
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("MPLBACKEND", "Agg")
# TensorFlow's C++ warnings off, set before any test imports TensorFlow. The tf.data service
# test stops its dispatcher and kills its workers at teardown, but the trainer-side reader of
# a job whose worker was killed stays blocked in TensorFlow's GetNext (the epoch never ends
# while the lost worker's task is listed) and cannot be cancelled from Python; its client
# would log a failed heartbeat every second until the process exits.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Some tests import TensorFlow directly: triton (where installed) goes first (core.tf_compat).
import_triton_before_tensorflow()


SERVER_FIXTURES = {"prefect_harness", "prefect_workspace"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that asks for the Prefect test server is marked ``server`` (``-m "not server"``
    skips the server's start-up along with it)."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_PREFECT_HOME, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _isolated_trainwise_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("trainwise-session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRAINWISE_HOME", str(root / "home"))
        patch.setenv("TRAINWISE_RUNS", str(root / "runs"))
        yield root


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture
def aws_isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every AWS_* variable cleared (credentials, AWS_PROFILE, AWS_SESSION_TOKEN, AWS_ROLE_ARN,
    AWS_WEB_IDENTITY_TOKEN_FILE, endpoints, ...), every proxy variable in either case cleared,
    AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE pointed at empty files, the instance
    metadata service disabled. Returns the folder holding the empty files."""
    for name in list(os.environ):
        if name.upper().startswith("AWS_") or name.upper() in PROXY_VARIABLES:
            monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "aws-empty"
    folder.mkdir()
    for variable, filename in (("AWS_CONFIG_FILE", "config"), ("AWS_SHARED_CREDENTIALS_FILE", "credentials")):
        (folder / filename).write_text("")
        monkeypatch.setenv(variable, str(folder / filename))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return folder


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    """moto's server (S3, Lambda's control plane, IAM) on a free loopback port: its URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def moto_env(moto_server: str, monkeypatch: pytest.MonkeyPatch, aws_isolated_env: Path) -> str:
    """The AWS variables pointing at moto's server, with dummy credentials and us-east-1: its URL."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ENDPOINT_URL", moto_server)):
        monkeypatch.setenv(name, value)
    return moto_server


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test server (temporary SQLite DB) for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def _workspace_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("trainwise-workspace")
    return {"home": root / "home", "runs": root / "runs", "root": root}


@pytest.fixture
def prefect_workspace(
    prefect_harness: None, _workspace_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path]:
    """The Prefect test server plus a trainwise home and runs folder shared by the session
    (so a second flow run in the session can hit the first one's profile cache)."""
    monkeypatch.setenv("TRAINWISE_HOME", str(_workspace_dirs["home"]))
    monkeypatch.setenv("TRAINWISE_RUNS", str(_workspace_dirs["runs"]))
    return _workspace_dirs
