"""The one atomic write: whole or nothing, nothing left to block a retry, failures named by path."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from specpolicy.files import atomic_path, write_text


def test_a_failed_write_keeps_the_old_version_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "table.json"
    write_text(target, "old")
    for error in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(error)), atomic_path(target) as tmp:
            tmp.write_text("half")
            raise error
        assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["table.json"]


def test_a_library_error_carrying_an_os_error_becomes_an_os_error_naming_the_path(tmp_path):
    class SafetensorError(Exception):
        pass

    with pytest.raises(OSError, match="No space left") as raised, atomic_path(tmp_path / "w.safetensors"):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    assert raised.value.errno == 28 and raised.value.filename == str(tmp_path / "w.safetensors")


def test_folders_replace_an_earlier_output_whole_and_refuse_any_other(tmp_path):
    out = tmp_path / "model"
    with atomic_path(out, folder="summary.json") as folder:
        (folder / "summary.json").write_text("1")
        (folder / "weights").write_text("a")
    with atomic_path(out, folder="summary.json") as folder:
        (folder / "summary.json").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]  # never two models mixed
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not an earlier output"):
        atomic_path(tmp_path / "mine", folder="summary.json").__enter__()
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


@pytest.mark.slow  # trains a small BlockPilot twice
def test_train_under_a_file_size_limit_names_the_path_and_the_retry_works(replay_store, tmp_path):
    """Reproduced first: the weights' write failed inside safetensors and the CLI called it a bug in
    specpolicy."""
    out = tmp_path / "bp"
    args = [sys.executable, "-B", "-m", "specpolicy.cli", "train", "blockpilot", "--sweep",
            str(replay_store.path),
            "--out", str(out), "--hidden", "16", "--epochs", "2"]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    failed = subprocess.run(args, capture_output=True, text=True, preexec_fn=limit)
    message = " ".join(failed.stderr.split())
    assert failed.returncode == 2 and "bug" not in message
    assert "File too large" in message and str(out) in message
    assert not out.exists() and not list(tmp_path.glob("bp*"))
    subprocess.run(args, capture_output=True, check=True)
    assert (out / "training_summary.json").exists()


def test_a_refused_write_names_the_users_path_not_the_temporary_one(tmp_path):
    """Issue 48: --plot and --out errors named the hidden temporary file (x.png.tmp), not the user's path."""
    import errno

    from specpolicy.files import atomic_path

    target = tmp_path / "plot.png"
    with pytest.raises(OSError) as caught, atomic_path(target) as tmp:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp))
    assert caught.value.filename == str(target) and caught.value.errno == errno.ENOSPC
    with pytest.raises(OSError) as inside, atomic_path(tmp_path / "model", folder="summary.json") as tmp:
        raise OSError(errno.EFBIG, "File too large", str(tmp / "weights.safetensors"))
    assert inside.value.filename == str(tmp_path / "model" / "weights.safetensors")


def test_an_output_folder_under_a_file_is_refused_before_any_work(tmp_path):
    """Reproduced: `train --out FILE/sub` trained the whole model and then failed to save it ("Not a
    directory: FILE/sub.tmp; pass a file path where a file is expected, a folder otherwise")."""
    from specpolicy.files import check_replaceable

    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"file/sub lies under the file .*file; pass a new folder"):
        check_replaceable(tmp_path / "file" / "sub", "summary.json")
    with pytest.raises(ValueError, match=r"file is a file; pass a new folder"):
        check_replaceable(tmp_path / "file", "summary.json")
