"""CPU-only: the fast page's whole-backward tables and summary are drawn from
results/fast_backward_bench.json, and what its prose says of them holds: the bytes a two-kernel
backward moves cap it near 60% of copy, and the best cells are near that."""
from pathlib import Path

from reimpl.docsite import fast_tables as F

ROOT = Path(__file__).resolve().parents[1]


def test_tables_hold_every_shape_of_the_record_with_both_ops():
    d = F.load(F.FAST_BACKWARD)
    shapes = {(r["M"], r["N"]) for r in d["rows"]}
    for arg in ("fp32", "bf16 flushed"):
        text = F.fast_backward(arg)
        rows = [line for line in text.splitlines() if line.startswith("| ") and "×" in line.split("|")[1]
                and "torch" not in line]
        assert len(rows) == len(shapes)
        assert all(len(line.split("|")) == 5 and line.count(" / ") == 4 for line in rows)


def test_summary_counts_match_the_record():
    d = F.load(F.FAST_BACKWARD)
    s = F.backward_summary(d)
    for op, v in s.items():
        cells = [c for m in d["methods"] for (o, dt, M, N), c in F.backward_cells(d, m).items()
                 if o == op and F.large(dt, M, N)]
        assert v["cells"] == len(cells) > 0
        assert v["no_slower_than_torch"] == sum(c["fast"]["ms"] <= c["torch"]["ms"] for c in cells)
    text = F.fast_backward_summary()
    assert f"of {s['layer_norm']['cells']} cells" in text and f"faster than it in {s['rms_norm']['liger_faster']}" in text


def test_the_pages_sixty_percent_sentence_holds():
    """Five tensors moved for three that count: 3/5 of copy at copy speed; the best cells near it."""
    page = (ROOT / "docs/ladder/fast.md").read_text()
    assert "reaches 60% of copy; the best\ncells above are near that" in page
    s = F.backward_summary(F.load(F.FAST_BACKWARD))
    best = max(v["pct"][1] for v in s.values())
    assert 55 <= best <= 66, best
