"""CPU, no network: `fetch-upstream` against fabricated files served from a local HTTP server. A
sha256 mismatch is caught, a match passes, an unpinned file reports its hash and has its symbol
ranges checked, and the wheel check runs only for the pinned torch."""
import hashlib

from reimpl.upstream import fetch
from tests.site_helpers import serve

GOOD = "int a;\nvoid alpha() {\n}\nstruct beta_double {};\n"
PIN = "0" * 40


def _manifest(sha_a, sha_b=None):
    return {"torch": "2.11.0", "commit": PIN,
            "files": {"x/a.h": {"sha256": sha_a, "sha256_wheel": None}, "x/b.cu": {"sha256": sha_b}},
            "symbols": {"alpha": {"file": "x/b.cu", "lines": [2, 3]},
                        "beta_double": {"file": "x/b.cu", "lines": [4, 4]}}}


def _serve(tmp_path):
    (tmp_path / "srv/x").mkdir(parents=True)
    (tmp_path / "srv/x/a.h").write_text(GOOD)
    (tmp_path / "srv/x/b.cu").write_text(GOOD)
    return serve(tmp_path / "srv")


def test_match_passes_and_mismatch_is_caught(tmp_path):
    good = hashlib.sha256(GOOD.encode()).hexdigest()
    with _serve(tmp_path) as base:
        ok = fetch.fetch_all(_manifest(good), base, tmp_path / "cache")
        bad = fetch.fetch_all(_manifest("f" * 64), base, tmp_path / "cache")
    assert ok[0].status == "ok" and ok[0].sha256 == good
    assert (tmp_path / "cache/x/a.h").read_text() == GOOD
    assert bad[0].status == "mismatch" and "f" * 64 in bad[0].detail


def test_unpinned_file_reports_hash_and_checks_ranges(tmp_path):
    with _serve(tmp_path) as base:
        r = fetch.fetch_all(_manifest(None), base, tmp_path / "cache")[1]
    assert r.status == "unpinned" and r.sha256 == hashlib.sha256(GOOD.encode()).hexdigest()
    assert r.range_problems == []
    moved = _manifest(None)
    moved["symbols"]["alpha"]["lines"] = [1, 1]
    moved["symbols"]["beta_double"]["lines"] = [4, 9]
    assert fetch.range_problems(moved, "x/b.cu", GOOD) == [
        "alpha: not named in L1-L1", "beta_double: range L4-L9 outside the file's 4 lines"]


def test_download_error_is_reported(tmp_path):
    with _serve(tmp_path) as base:
        r = fetch.fetch_file(_manifest(None), "x/missing.h", base, tmp_path / "cache")
    assert r.status == "error" and "404" in r.detail


def test_wheel_check_only_for_the_pinned_torch(tmp_path):
    header = tmp_path / "include/x/a.h"
    header.parent.mkdir(parents=True)
    header.write_text(GOOD)
    m = _manifest(None)
    problems, note = fetch.check_wheel(m, "2.13.0+cpu", tmp_path / "include")
    assert problems == [] and "skipped" in note and "2.13.0+cpu" in note
    m["files"]["x/a.h"]["sha256_wheel"] = hashlib.sha256(GOOD.encode()).hexdigest()
    assert fetch.check_wheel(m, "2.11.0+cu130", tmp_path / "include")[0] == []
    m["files"]["x/a.h"]["sha256_wheel"] = "e" * 64
    assert "expected " + "e" * 64 in fetch.check_wheel(m, "2.11.0+cu130", tmp_path / "include")[0][0]


def test_wheel_include_path():
    assert fetch.wheel_include_path("aten/src/ATen/native/cuda/block_reduce.cuh") == "ATen/native/cuda/block_reduce.cuh"
