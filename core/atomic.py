"""The one way trainwise writes a file: whole or not at all.

:func:`write_with` writes into a temporary file with a unique name in the target's own folder
(so two writers, threads or processes, never share one), flushes and fsyncs it, then renames it
over the target with one ``os.replace`` (atomic on POSIX) and fsyncs the folder. A crash at any
moment leaves the previous file or the new one, whole; a reader never sees a half-written file.
The temporary file is removed when the write fails.

An ``OSError`` on the way (a full disk, no permission, a read-only file system) becomes a
one-line :class:`~core.errors.UserError` naming the path and the reason; the file that was
there stays as it was, and so do the files already written before it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from core.errors import UserError

#: The temporary files' names: ``.<target name>.<random>.tmp`` beside the target.
TMP_SUFFIX = ".tmp"


def check_replaceable(path: str | os.PathLike[str]) -> Path:
    """``path`` if an atomic write may rename a new file over it: it does not exist yet or is
    a regular file. A device, FIFO, socket or folder is refused with a UserError; renaming
    over ``/dev/null`` as root would replace the device with a plain file."""
    path = Path(path)
    if (path.exists() or path.is_symlink()) and not path.is_file():
        raise UserError(f"{path} is not a regular file (a folder, device or pipe); give the path of a file to write")
    return path


def write_failed(path: Path, exc: OSError) -> UserError:
    """The one-line error for an OSError met while writing ``path``."""
    reason = exc.strerror or type(exc).__name__
    return UserError(f"cannot write {path}: {reason} (errno {exc.errno}); the previous file, if any, is unchanged")


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the rename itself is still atomic
    finally:
        os.close(fd)


def write_file(path: str | os.PathLike[str], fill: Callable[[Path], object]) -> Path:
    """Call ``fill(tmp)`` to write a fresh temporary file ``tmp`` beside ``path`` (for writers
    that take a path, such as TensorFlow's TFRecordWriter), fsync it, then put it in place
    atomically (see the module docstring); return the path."""
    path = check_replaceable(path)
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        fill(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise write_failed(path, exc) from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path


def write_with(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(fh)`` on a fresh binary temporary file beside ``path``, then put it in
    place atomically (see the module docstring); return the path."""

    def fill(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            write(fh)

    return write_file(path, fill)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return write_with(path, lambda fh: fh.write(data))


def write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (encoded first: text that cannot be encoded writes nothing)."""
    return write_bytes(path, text.encode(encoding))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: mkstemp makes 0600 files; a written file gets the mode a plain open() would give it.
_UMASK = _umask()


def save_figure(fig: object, path: str | os.PathLike[str]) -> Path:
    """A matplotlib figure saved atomically, in the format its suffix names (PNG when none)."""
    fmt = Path(path).suffix.lstrip(".") or "png"
    return write_with(path, lambda fh: fig.savefig(fh, format=fmt))  # type: ignore[attr-defined]
