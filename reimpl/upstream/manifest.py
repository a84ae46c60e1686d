"""reference/upstream.json: which upstream lines each of our functions mirrors, and where it is explained.

Each mirrored function sits in a named snippet section of our source (the start/end markers the
docs site includes code by) whose first lines are
    // upstream: <file>#L<start>-L<end>     (or `#` in Python)
    // docs: <page>#<anchor>
`sync_comments()` rewrites those two lines from the manifest; `check()` reports any drift.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "reference" / "upstream.json"


def load() -> dict:
    return json.loads(MANIFEST.read_text())


def permalink(manifest: dict, name: str) -> str:
    s = manifest["symbols"][name]
    return manifest["permalink"].format(file=s["file"], start=s["lines"][0], end=s["lines"][1])


def sections(path: Path) -> dict[str, list[str]]:
    """Named snippet sections of a source file: name -> its lines (markers excluded)."""
    out, cur = {}, None
    for line in path.read_text().splitlines():
        m = re.search(r"--8<-- \[(start|end):([\w.]+)\]", line)
        if m and m.group(1) == "start":
            cur = m.group(2)
            out[cur] = []
        elif m:
            cur = None
        elif cur is not None:
            out[cur].append(line)
    return out


def expected_comments(manifest: dict, name: str) -> tuple[str, str]:
    s = manifest["symbols"][name]
    return f"upstream: {s['file']}#L{s['lines'][0]}-L{s['lines'][1]}", f"docs: {s['docs']}"


def check() -> list[str]:
    """Problems: a symbol without its section or with stale comments, or a mirrored section missing from the manifest."""
    manifest = load()
    problems = []
    claimed = set()
    for name, s in manifest["symbols"].items():
        file, section = s["ours"].split(":")
        claimed.add((file, section))
        secs = sections(ROOT / file)
        if section not in secs:
            problems.append(f"{name}: no section [start:{section}] in {file}")
            continue
        up, docs = expected_comments(manifest, name)
        head = [l.strip().lstrip("/#").strip() for l in secs[section][:3]]
        if up not in head:
            problems.append(f"{name}: {file} lacks the comment '{up}'")
        if docs not in head:
            problems.append(f"{name}: {file} lacks the comment '{docs}'")
        a, b = s["lines"]
        if not (1 <= a <= b):
            problems.append(f"{name}: bad line range {s['lines']}")
    for path in list((ROOT / "reimpl").glob("*.py")) + list((ROOT / "reimpl" / "cuda").glob("*")):
        rel = str(path.relative_to(ROOT))
        for section, lines in sections(path).items():
            if any("upstream:" in l for l in lines[:3]) and (rel, section) not in claimed:
                problems.append(f"{rel}:{section} says it mirrors upstream but is not in the manifest")
    return problems


def sync_comments() -> int:
    """Rewrite each section's upstream/docs comment lines from the manifest; return files changed."""
    manifest = load()
    by_file: dict[str, dict[str, str]] = {}
    for name, s in manifest["symbols"].items():
        file, section = s["ours"].split(":")
        by_file.setdefault(file, {})[section] = name
    changed = 0
    for file, secs in by_file.items():
        path = ROOT / file
        lines = path.read_text().splitlines(keepends=True)
        cur = None
        for i, line in enumerate(lines):
            m = re.search(r"--8<-- \[start:([\w.]+)\]", line)
            if m:
                cur = m.group(1)
                continue
            if cur in secs:
                up, docs = expected_comments(manifest, secs[cur])
                lead = re.match(r"\s*(//|#)\s*", line)
                if lead and line.strip().lstrip("/#").strip().startswith("upstream:"):
                    lines[i] = f"{lead.group(1)} {up}\n"
                elif lead and line.strip().lstrip("/#").strip().startswith("docs:"):
                    lines[i] = f"{lead.group(1)} {docs}\n"
                    cur = None
        new = "".join(lines)
        if new != path.read_text():
            path.write_text(new)
            changed += 1
    return changed
