"""kvplan's one file writer (kvplan.core.files.atomic_writer): links, FIFOs, /proc fd links, permissions.

Special files here are made under tmp_path (mkfifo, os.pipe, symlinks): a test never points a
writer at a real /dev node, so a regression cannot replace one.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.core.files import atomic_write

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_fifo_is_written_into_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()  # opening a FIFO for reading blocks until the writer opens it
    atomic_write(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == ["through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]  # no temp file left


def test_symlink_to_a_fifo_writes_the_fifo(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "out.json").symlink_to("pipe")
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append((tmp_path / "pipe").read_text()), daemon=True)
    reader.start()
    atomic_write(tmp_path / "out.json", "{}\n")
    reader.join(timeout=10)
    assert got == ["{}\n"] and os.readlink(tmp_path / "out.json") == "pipe"


def test_symlink_to_proc_fd_writes_the_open_file(tmp_path):
    """/proc/self/fd/N (what /dev/stdout links to) is written in place, the link kept."""
    r, w = os.pipe()
    fd_link = f"/proc/self/fd/{w}"
    try:
        link = tmp_path / "stdout-link"
        link.symlink_to(fd_link)
        atomic_write(link, "to the fd\n")
        os.close(w)
        w = -1
        assert os.read(r, 1000) == b"to the fd\n"
        assert os.readlink(link) == fd_link and os.listdir(tmp_path) == ["stdout-link"]
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_symlink_to_regular_file_writes_the_target_atomically(tmp_path):
    real = tmp_path / "data" / "real.csv"
    real.parent.mkdir()
    real.write_text("old\n")
    (tmp_path / "link.csv").symlink_to(real)

    def boom(stream):
        stream.write("half")
        raise RuntimeError("died")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "link.csv", boom)
    # the temp file was in the target's folder
    assert real.read_text() == "old\n" and os.listdir(real.parent) == ["real.csv"]
    atomic_write(tmp_path / "link.csv", "new\n")
    assert (tmp_path / "link.csv").is_symlink() and os.readlink(tmp_path / "link.csv") == str(real)
    assert real.read_text() == "new\n" and sorted(os.listdir(tmp_path)) == ["data", "link.csv"]


def test_chain_of_relative_links_and_dangling_link(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").symlink_to("sub/b")  # a -> sub/b -> c (relative to sub/) -> missing sub/c
    (tmp_path / "sub" / "b").symlink_to("c")
    atomic_write(tmp_path / "a", "made\n")
    assert (tmp_path / "sub" / "c").read_text() == "made\n"
    assert (tmp_path / "a").is_symlink() and (tmp_path / "sub" / "b").is_symlink()


def test_symlink_loop_and_directory_are_one_line_errors(tmp_path):
    (tmp_path / "x").symlink_to("y")
    (tmp_path / "y").symlink_to("x")
    with pytest.raises(KvplanError, match="cannot write .*x") as e:
        atomic_write(tmp_path / "x", "z")
    assert e.value.exit_code == 2
    with pytest.raises(KvplanError, match="is a directory") as e:
        atomic_write(tmp_path, "z")
    assert e.value.exit_code == 2
    (tmp_path / "f").write_text("")
    with pytest.raises(KvplanError, match="cannot write") as e:
        atomic_write(tmp_path / "f" / "under-a-file", "z")
    assert e.value.exit_code == 2


def test_new_file_gets_umask_mode_existing_keeps_its_bits(tmp_path, umask_027):
    new = tmp_path / "new.json"
    atomic_write(new, "{}\n")
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o640  # 0o666 & ~0o027, not mkstemp's 0o600
    old = tmp_path / "old.json"
    old.write_text("x")
    os.chmod(old, 0o604)
    atomic_write(old, "y")
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o604 and old.read_text() == "y"


def test_sweep_csv_through_a_symlink(tmp_path, kvplan_home):
    real = tmp_path / "real.csv"
    (tmp_path / "link.csv").symlink_to(real)
    r = run("sweep", "--models", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--gpu-counts", "1",
            "-o", tmp_path / "link.csv")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "link.csv").is_symlink() and real.read_text().startswith("rank,model,")


# --- models import goes through the same writer --------------------------------------------------

def test_models_import_bad_home_is_one_line(tmp_path, monkeypatch):
    home = tmp_path / "a-file"
    home.write_text("")
    monkeypatch.setenv("KVPLAN_HOME", str(home))
    r = run("models", "import", "qwen3-8b", "--force")
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == [f"Error: cannot write {home / 'models'}: Not a directory"]


def test_models_import_disk_failure_is_exit_1_and_leaves_nothing(tmp_path, kvplan_home, monkeypatch):
    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    r = run("models", "import", "qwen3-8b", "--force")
    assert r.exit_code == 1 and r.stderr.splitlines()[-1].endswith("No space left on device"), r.output
    assert os.listdir(kvplan_home / "models") == []


def test_models_import_writes_through_a_symlink_with_umask_mode(tmp_path, kvplan_home, umask_027):
    models = tmp_path / "catalog"  # --dir: a folder the catalog lookup does not read
    models.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (models / "qwen3-8b.json").symlink_to(tmp_path / "elsewhere" / "qwen3-8b.json")
    r = run("models", "import", "qwen3-8b", "--dir", models, "--force")
    assert r.exit_code == 0, r.output
    target = tmp_path / "elsewhere" / "qwen3-8b.json"
    assert (models / "qwen3-8b.json").is_symlink() and json.loads(target.read_text())["name"] == "qwen3-8b"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
