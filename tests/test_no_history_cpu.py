"""CPU-only: the repository and its built site speak of the code and the measurements only. No
tracked file (code, pages, results, scripts) and no page of the built site names an issue by its
number or a working session ("issue 12", "the third session"); git's log is where history lives."""
import re
import subprocess

from tests.site_helpers import ROOT, built_site

HISTORY = re.compile(r"\bissues?\s*#?\d+(?![\d%.])|\b(?:first|second|third|fourth|fifth|sixth|seventh|"
                     r"eighth|ninth|tenth|last|previous|next|this|that|earlier|later)\s+sessions?\b|"
                     r"\bsessions?\s+\d+\b", re.I)
TEXT = (".py", ".md", ".json", ".sh", ".cu", ".cuh", ".h", ".yml", ".toml", ".ini", ".txt", ".css", ".tsv")


def _hits(text: str) -> list[str]:
    out = []
    for m in HISTORY.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end())]
        out.append(f"{m.group(0)!r} in: {line.strip()[:160]}")
    return out


def test_the_pattern_finds_history():
    assert _hits("tried for issue 12 in the third session")
    assert not _hits("a cuda-gdb session; the test session; lambda()#1; issues of alignment; "
                       "issue 12% of cycles")  # a warp's instruction issue rate is a measurement


def test_tracked_files_name_no_issue_or_session():
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    bad = []
    for f in files:
        path = ROOT / f
        if f.endswith(TEXT) and path.is_file() and f != "tests/test_no_history_cpu.py":
            bad += [f"{f}: {h}" for h in _hits(path.read_text(errors="replace"))]
    assert not bad, "\n".join(bad[:40])


def test_built_site_names_no_issue_or_session():
    bad = []
    for page in built_site().rglob("*.html"):
        bad += [f"{page.relative_to(built_site())}: {h}" for h in _hits(page.read_text(errors="replace"))]
    assert not bad, "\n".join(bad[:40])
