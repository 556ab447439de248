"""aka.trees: folders a candidate shaped (deep, long-named, closed to their owner, linked out)
measured and removed, by the judge and by a user who is not root; files an agent left read only
where they are plain, bounded and reached without a link."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aka.trees import UnusableFileError, agent_file_digest, read_agent_file, remove_tree, tree_usage

MIB = 2**20


def _chain(base: Path, name: str, depth: int) -> int:
    """An open handle on the bottom of a chain of `depth` folders called `name` (no path strings)."""
    fd = os.open(base, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    return fd


def _write(fd: int, name: str, size: int) -> None:
    with open(os.open(name, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "wb") as handle:
        handle.write(b"\xab" * size)
    os.close(fd)


def _shape(root: Path) -> int:
    """The tree the red team made: deeper than Python recurses, paths past PATH_MAX, a closed
    folder; the bytes written."""
    root.mkdir()
    _write(_chain(root, "a", 3000), "deep.bin", 3 * MIB)
    _write(_chain(root, "b" * 250, 30), "long.bin", 2 * MIB)
    closed = root / "c" / "d"
    closed.mkdir(parents=True)
    (closed / "closed.bin").write_bytes(b"\xcd" * MIB)
    closed.chmod(0)
    (root / "c").chmod(0o500)  # nothing may be unlinked in it
    return 6 * MIB


def test_a_tree_of_any_shape_is_measured_and_removed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.bin").write_bytes(b"k" * (4 * MIB))
    root = tmp_path / "tree"
    try:
        written = _shape(root)
        (root / "link").symlink_to(outside)  # neither counted nor followed
        assert written <= tree_usage(root) < written + 16 * MIB  # plus the 3,000 folders' own blocks
        assert remove_tree(root) and not root.exists()
    finally:  # pytest's own clean-up of old runs would recurse into what is left
        subprocess.run(["rm", "-rf", str(root)], check=False)
    assert (outside / "keep.bin").stat().st_size == 4 * MIB
    assert remove_tree(root)  # gone already: nothing to do
    assert tree_usage(root) == 0


def test_a_user_without_privileges_opens_up_what_it_closed(tmp_path: Path) -> None:
    """Root's capabilities read any folder; an evaluator without them must chmod back what its
    worker (the same user) closed, or the quota would miss what the closed folder holds."""
    script = (
        "import sys; from pathlib import Path\n"
        f"sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1] / 'src')!r}]\n"
        "from test_trees import _shape\n"
        "from aka.trees import UnusableFileError, agent_file_digest, read_agent_file, remove_tree, tree_usage\n"
        f"root = Path({str(tmp_path / 'tree')!r})\n"
        "written = _shape(root)\n"
        "try:\n"
        "    open(root / 'c' / 'd' / 'closed.bin').close()\n"
        "    print('readable')\n"
        "except PermissionError:\n"
        "    print('closed')\n"
        "print(tree_usage(root) >= written, remove_tree(root), root.exists())\n"
    )
    prefix = []
    if os.getuid() == 0:  # root without its capabilities: held to the owner's permissions like anyone
        if shutil.which("setpriv") is None:
            pytest.skip("running as root, and no setpriv to drop root's capabilities")
        prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"]
    try:
        done = subprocess.run([*prefix, sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run(["rm", "-rf", str(tmp_path / "tree")], check=False)
    assert done.stdout.split() == ["closed", "True", "True", "False"], done.stderr[-2000:]


def test_strict_removal_says_when_something_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    monkeypatch.setattr(os, "rmdir", lambda *args, **kwargs: (_ for _ in ()).throw(PermissionError("held")))
    assert remove_tree(root) is False
    with pytest.raises(OSError, match="cannot remove"):
        remove_tree(root, strict=True)


def test_an_agents_file_is_read_only_when_plain_bounded_and_reached_without_links(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "src").mkdir(parents=True)
    elsewhere.mkdir()
    (work / "src" / "kernel.py").write_text("plain")
    (elsewhere / "kernel.py").write_text("the judge must never read this")
    assert read_agent_file(work, "src/kernel.py") == b"plain"
    assert read_agent_file(work, "src/absent.py") is None and read_agent_file(work, "gone/kernel.py") is None
    assert read_agent_file(tmp_path / "no_work", "kernel.py") is None
    (work / "linked").symlink_to(elsewhere)  # a linked parent folder, not only a linked file
    (work / "src" / "link.py").symlink_to(elsewhere / "kernel.py")
    os.mkfifo(work / "src" / "fifo.py")  # opening it must not wait for a writer
    with open(work / "src" / "huge.py", "wb") as sparse:  # 1 TiB that takes no disk
        sparse.truncate(2**40)
    (work / "src" / "closed.py").write_text("x")
    (work / "src" / "closed.py").chmod(0)
    reasons = {
        "linked/kernel.py": "linked is a symbolic link",
        "src/link.py": "is a symbolic link",
        "src/kernel.py/x.py": "kernel.py is not a folder",
        "src/fifo.py": "not a plain file",
        "src/huge.py": f"{2**40} bytes, more than",
        "src": "not a plain file",
    }
    if os.geteuid() != 0:
        reasons["src/closed.py"] = "cannot be opened"
    for rel, why in reasons.items():
        with pytest.raises(UnusableFileError, match=why):
            read_agent_file(work, rel)
        assert agent_file_digest(work, rel).startswith("unusable: ")  # type: ignore[union-attr]
    with pytest.raises(UnusableFileError, match="6 bytes, more than the 5"):
        (work / "src" / "six.py").write_text("sixsix")
        read_agent_file(work, "src/six.py", limit=5)
    (tmp_path / "work_link").symlink_to(work)
    with pytest.raises(UnusableFileError, match="its folder is a symbolic link"):
        read_agent_file(tmp_path / "work_link", "src/kernel.py")
    assert agent_file_digest(work, "src/kernel.py") == hashlib.sha256(b"plain").hexdigest()
    assert agent_file_digest(work, "src/absent.py") is None


def test_a_plain_file_is_measured_as_itself(tmp_path: Path) -> None:
    (tmp_path / "scratch.bin").write_bytes(b"\xab" * MIB)
    (tmp_path / "link").symlink_to(tmp_path / "scratch.bin")
    assert tree_usage(tmp_path / "scratch.bin") >= MIB  # the agent's scratch files, freed when the disk is low
    assert tree_usage(tmp_path / "link") < MIB and tree_usage(tmp_path / "absent") == 0
