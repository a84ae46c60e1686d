"""Fetch the pinned upstream files named in reference/upstream.json into an ignored cache and verify them.

For each file in the manifest: download `<base>/<path>` (by default raw.githubusercontent.com at the
pinned commit) into `.cache/upstream/<commit>/<path>`, then
  - compare its sha256 with the manifest's, where the manifest has one;
  - where it has none (layer_norm_kernel.cu: we never saw the pinned text), report the computed hash
    (`write_hash=True` records it) and check that every symbol's range starts where its name appears;
  - where the installed torch is the pinned version, compare the headers its wheel ships under
    torch/include with the manifest's `sha256_wheel`.
Nothing fetched is committed: the cache is in .gitignore.
"""
from __future__ import annotations

import hashlib
import json
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from . import manifest as manifest_mod

RAW = "https://raw.githubusercontent.com/pytorch/pytorch/{commit}"
CACHE = manifest_mod.ROOT / ".cache" / "upstream"
HEAD_LINES = 5  # a symbol's name must appear within this many lines from the start of its range


@dataclass
class FileReport:
    path: str
    sha256: str | None = None          # computed from what was downloaded
    status: str = "ok"                 # ok | mismatch | unpinned | error
    detail: str = ""
    range_problems: list[str] = field(default_factory=list)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def range_problems(m: dict, path: str, text: str) -> list[str]:
    """Symbols of `path` whose line range lies outside the text or does not start at their name.
    An overload spelled `<name>_<type>` in the manifest (e.g. ..._double) is looked up as `<name>`."""
    lines = text.splitlines()
    out = []
    for name, s in m["symbols"].items():
        if s["file"] != path:
            continue
        a, b = s["lines"]
        if not (1 <= a <= b <= len(lines)):
            out.append(f"{name}: range L{a}-L{b} outside the file's {len(lines)} lines")
            continue
        head = "\n".join(lines[a - 1:min(b, a - 1 + HEAD_LINES)])
        if name not in head and name.rsplit("_", 1)[0] not in head:
            out.append(f"{name}: not named in L{a}-L{min(b, a - 1 + HEAD_LINES)}")
    return out


def fetch_file(m: dict, path: str, base: str, cache: Path) -> FileReport:
    rep = FileReport(path)
    try:
        with urllib.request.urlopen(f"{base}/{path}", timeout=30) as r:
            data = r.read()
    except OSError as e:  # URLError, HTTPError and timeouts are all OSErrors
        rep.status, rep.detail = "error", f"download failed: {e}"
        return rep
    dest = cache / path
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    rep.sha256 = sha256(data)
    want = m["files"][path].get("sha256")
    if want is None:
        rep.status, rep.detail = "unpinned", "the manifest has no sha256 for this file yet"
    elif want != rep.sha256:
        rep.status, rep.detail = "mismatch", f"expected {want}"
    rep.range_problems = range_problems(m, path, data.decode("utf-8", "replace"))
    return rep


def fetch_all(m: dict, base: str | None = None, cache: Path | None = None) -> list[FileReport]:
    base = (base or RAW.format(commit=m["commit"])).rstrip("/")
    cache = cache or CACHE / m["commit"]
    return [fetch_file(m, path, base, cache) for path in m["files"]]


def wheel_include_path(path: str) -> str:
    """Where the wheel ships an upstream header: aten/src/ATen/... -> include/ATen/..."""
    return path.removeprefix("aten/src/")


def check_wheel(m: dict, version: str | None = None, include: Path | None = None) -> tuple[list[str], str]:
    """(problems, note): compare the installed torch's headers with `sha256_wheel`, if it is the pinned torch."""
    if version is None or include is None:
        import torch
        version = torch.__version__
        include = Path(torch.__file__).parent / "include"
    if not version.startswith(m["torch"]):
        return [], f"skipped the wheel check: installed torch is {version}, the pin is {m['torch']}"
    problems, n = [], 0
    for path, f in m["files"].items():
        want = f.get("sha256_wheel")
        if want is None:
            continue
        header = include / wheel_include_path(path)
        if not header.exists():
            problems.append(f"{path}: not in the wheel at {header}")
        elif sha256(header.read_bytes()) != want:
            problems.append(f"{path}: the wheel's copy has sha256 {sha256(header.read_bytes())}, expected {want}")
        n += 1
    return problems, f"checked {n} headers of torch {version} under {include}"


def record_hashes(reports: list[FileReport]) -> list[str]:
    """Write the computed sha256 of each unpinned file into reference/upstream.json. The manifest is
    re-read just before writing and only those `sha256` fields change."""
    m = manifest_mod.load()
    done = []
    for r in reports:
        if r.status == "unpinned" and r.sha256 and m["files"][r.path].get("sha256") is None:
            m["files"][r.path]["sha256"] = r.sha256
            done.append(r.path)
    if done:
        manifest_mod.MANIFEST.write_text(json.dumps(m, indent=1) + "\n")
    return done


def main(base: str | None = None, write_hash: bool = False) -> int:
    m = manifest_mod.load()
    reports = fetch_all(m, base)
    failed = False
    for r in reports:
        print(f"{r.status:9s} {r.path}  sha256={r.sha256}  {r.detail}")
        for p in r.range_problems:
            print(f"          range: {p}")
        failed |= r.status in ("mismatch", "error") or bool(r.range_problems)
    if write_hash:
        for path in record_hashes(reports):
            print(f"recorded sha256 of {path} in {manifest_mod.MANIFEST.relative_to(manifest_mod.ROOT)}")
    problems, note = check_wheel(m)
    print(note)
    for p in problems:
        print(f"wheel     {p}")
    return 1 if failed or problems else 0
