"""The files dmalab writes: each one whole or not at all, a shared one under a lock, and what
an existing file holds, so that a command does not overwrite a file of another kind.

Every output goes to a temporary file in the target's folder (so that the rename cannot cross
file systems), is synced, and is renamed over the target: a reader sees the old file or the new
one, never part of one, and a write that is interrupted (an error, Ctrl-C) leaves the old file
as it was (or no file) and no temporary file. Two processes writing one file each leave one of
the two whole files.

A file that several processes read, merge into and write (a sweep's results, appended to by
sweeps running at once) is changed under :func:`locked`: an exclusive ``flock`` on a lock file
beside it (``FILE.lock``), held for the whole read-merge-write.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

Writer = Callable[[Path], None]
"""Something that writes a whole file at the path it is given (a temporary one)."""


def _temporary(target: Path) -> Path:
    """A new, empty file beside ``target`` that no other writer has, named after it and ending
    in its suffixes (a writer that picks its format by the name's suffix picks the right one).
    Created with the permissions a new file gets (0666 less the umask); an existing target's
    own permissions are copied on before the rename."""
    while True:
        part = f".{target.name}.{secrets.token_hex(4)}.part{''.join(target.suffixes)}"
        tmp = target.with_name(part)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp


def write_atomic(path: str | os.PathLike[str], data: str | bytes | Writer) -> Path:
    """Write ``path`` whole or not at all: ``data`` (text, written as UTF-8; bytes; or a
    :data:`Writer` called with a temporary path beside ``path``) goes to a temporary file in the
    same folder, is synced, and is renamed over ``path``. When anything stops the write, the
    temporary file is removed and ``path`` is as it was. An existing file keeps its
    permissions, and a symbolic link keeps pointing where it did: the file it names is the one
    replaced. Returns ``path``."""
    target = Path(os.path.realpath(path))
    tmp = _temporary(target)
    try:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        elif isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            data(tmp)
        try:
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return Path(path)


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file of ``path``: ``FILE.lock`` beside it."""
    p = Path(path)
    return p.with_name(p.name + ".lock")


@contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a ``flock`` on :func:`lock_path`) for the ``with``
    block, waiting for any other holder. The lock file is removed when the lock is let go; a
    process that locked a lock file another one removed meanwhile takes the new one instead,
    so that two holders never hold two files at once."""
    import fcntl

    lock = lock_path(path)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(lock)
                mine = os.fstat(fd)
                same = (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)  # the file was removed (or replaced) while this waited: lock the new one
    try:
        yield
    finally:
        try:
            lock.unlink(missing_ok=True)
        finally:
            os.close(fd)  # lets the lock go


_REASONS = {
    "ENOENT": "no such file",
    "EACCES": "permission denied",
    "EPERM": "permission denied",
    "EISDIR": "is a folder, not a file",
    "ENOTDIR": "a part of its path is not a folder",
    "ENOSPC": "no space left on its device",
    "EROFS": "on a read-only file system",
    "ENAMETOOLONG": "the name is too long",
    "ELOOP": "too many symbolic links in its path",
}


def read_text(path: str | os.PathLike[str], what: str = "a text file") -> str:
    """The file's text (UTF-8); a file that is not text (binary, another encoding) is a
    :class:`dmalab.ScenarioError` naming it and the first byte that is not, not Python's
    ``UnicodeDecodeError``."""
    from dmalab import ScenarioError

    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioError(
            f"{path}: not {what}: byte {e.start} is 0x{data[e.start]:02x}, not UTF-8 text"
        ) from None


def reason(e: OSError) -> str:
    """Why a file could not be read or written, in a few words (``no such file``), without the
    ``[Errno 2]`` and the quoted name of Python's text."""
    import errno

    name = errno.errorcode.get(e.errno or 0, "")
    return _REASONS.get(name) or (e.strerror or str(e)).lower()


# What an existing file holds, told from its first bytes (a TOML file from the whole of it).

TRACE = "trace-event JSON"
HTML = "an HTML page"
PNG = "a PNG image"
SVG = "an SVG image"
PLATFORM = "a platform file (TOML)"
DEVICE = "a device file (TOML)"
COPY = "a [copy] platform section (TOML)"
EMPTY = "nothing (an empty file)"

_HEAD = 1 << 16
_TOML_MAX = 1 << 24
_TRACE = re.compile(rb'\s*\{\s*"traceEvents"\s*:')


def holds(path: str | os.PathLike[str]) -> str | None:
    """What the file at ``path`` holds, in words (one of this module's constants, or a
    description such as ``a sweep's results (CSV)``); None when there is no such file or it
    cannot be read."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return None
    if size == 0:
        return EMPTY
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head.startswith(b"PAR1"):
        return "Parquet data"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not a character cut at the end of the head
            return "binary data"
        text = head[: e.start].decode("utf-8")
    text = text.lstrip("\ufeff")
    lower = text.lstrip().lower()
    if _TRACE.match(head.lstrip(b"\xef\xbb\xbf")):
        return TRACE
    if lower.startswith(("<!doctype html", "<html")):
        return HTML
    if lower.startswith(("<?xml", "<svg", "<!doctype svg")) and "<svg" in lower:
        return SVG
    first_line = text.split("\n", 1)[0]
    if "cell_id" in first_line.split(","):
        return "a sweep's results (CSV)"
    if size <= _TOML_MAX:
        kind = _parsed_kind(p)
        if kind is not None:
            return kind
    if lower.startswith(("{", "[")):
        return "JSON"
    if "," in first_line:
        return "CSV data"
    return "text"


def _parsed_kind(p: Path) -> str | None:
    """What a small text file is when it parses as TOML or JSON, or None."""
    import json

    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    kind = _toml_kind(text)
    if kind is not None:
        return kind
    try:
        json.loads(text)
    except ValueError:
        return None
    return "JSON"


def _toml_kind(text: str) -> str | None:
    """What a TOML text is (platform, device, [copy] section, scenario, sweep), or None when
    it is not TOML (or an empty table)."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    if not table:
        return None
    if "grid" in table:
        return "a sweep file (TOML)"
    if "bus" in table:
        return PLATFORM
    if "device" in table and ("link" in table or "copy_engine" in table):
        return DEVICE
    if set(table) == {"copy"}:
        return COPY
    if "platform" in table:
        return "a scenario file (TOML)"
    return "TOML"
