"""``import_triton_before_tensorflow``: triton is imported only where installed and only before TensorFlow."""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

import pytest

from core.tf_compat import import_triton_before_tensorflow


class _Recorder:
    def __init__(self) -> None:
        self.imported: list[str] = []

    def __call__(self, name: str) -> ModuleType:
        self.imported.append(name)
        return ModuleType(name)


def _installed(name: str) -> ModuleSpec:
    return ModuleSpec(name, loader=None)


def _missing(name: str) -> None:
    return None


@pytest.fixture
def no_tf_or_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    monkeypatch.delitem(sys.modules, "triton", raising=False)


def test_imports_triton_when_installed_and_tensorflow_not_loaded(no_tf_or_triton: None) -> None:
    recorder = _Recorder()
    assert import_triton_before_tensorflow(_installed, recorder) is True
    assert recorder.imported == ["triton"]


def test_does_nothing_when_triton_is_not_installed(no_tf_or_triton: None) -> None:
    recorder = _Recorder()
    assert import_triton_before_tensorflow(_missing, recorder) is False
    assert recorder.imported == []


def test_does_nothing_once_tensorflow_is_loaded(no_tf_or_triton: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", ModuleType("tensorflow"))
    recorder = _Recorder()
    assert import_triton_before_tensorflow(_installed, recorder) is False
    assert recorder.imported == []


def test_does_nothing_when_triton_is_already_loaded(no_tf_or_triton: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "triton", ModuleType("triton"))
    recorder = _Recorder()
    assert import_triton_before_tensorflow(_installed, recorder) is False
    assert recorder.imported == []


def test_a_triton_that_fails_to_import_is_not_an_error(no_tf_or_triton: None) -> None:
    def broken(name: str) -> ModuleType:
        raise ImportError(f"{name}: built for another Python")

    assert import_triton_before_tensorflow(_installed, broken) is False
