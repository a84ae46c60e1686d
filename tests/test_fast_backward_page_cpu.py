"""CPU-only: the fast page's whole-backward tables and summary are drawn from
results/fast_backward_bench.json, and what its prose says of them holds: the bytes a two-kernel
backward moves cap it at 60% of copy, and the fused route's cells go past that."""
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


def fused(dtype: str, M: int, N: int) -> bool:
    """The bench's cell takes the fused route (it asks for every gradient, with a weight)."""
    from reimpl.fast import backward
    T = {"fp32": backward.K.float_, "bf16": backward.K.BFloat16, "fp16": backward.K.Half}[dtype]
    return backward.plan(T, False, True, M, N, 132) is not None


def test_the_pages_sixty_percent_sentences_hold():
    """Five tensors moved for three that count: 3/5 of copy at copy speed for the cells that keep two
    kernels, a little past it (L2); every fp32 fused cell goes past it, 16-bit RMSNorm's on some shapes,
    16-bit LayerNorm's on none."""
    page = " ".join((ROOT / "docs/ladder/fast.md").read_text().split())
    assert "such a backward reaches 60% of copy at most" in page
    assert ("reach at most 62% of copy, a little past the 60% that the count of bytes allows, whether the second "
            "kernel is the chains kernel or torch's tile") in page
    assert ("The fused cells can go past it: every fp32 fused cell does, and 16-bit RMSNorm's do on some shapes, "
            "while 16-bit LayerNorm's stay below it.") in page
    d = F.load(F.FAST_BACKWARD)
    big = [(o, dt, c["fast"]["pct_copy"], fused(dt, M, N)) for m in d["methods"]
           for (o, dt, M, N), c in F.backward_cells(d, m).items() if F.large(dt, M, N)]
    assert 60 < max(p for _, _, p, f in big if not f) <= 62.5
    assert min(p for _, dt, p, f in big if f and dt == "fp32") > 60
    rms16 = [p for o, dt, p, f in big if f and dt != "fp32" and o == "rms_norm"]
    ln16 = [p for o, dt, p, f in big if f and dt != "fp32" and o == "layer_norm"]
    assert max(rms16) > 60 > min(rms16) and max(ln16) <= 60


def test_liger_faster_cells_are_listed_from_the_record():
    d = F.load(F.FAST_BACKWARD)
    cells = F.liger_faster_cells(d)
    want = {(o, dt, M, N) for m in d["methods"] for (o, dt, M, N), c in F.backward_cells(d, m).items()
            if F.large(dt, M, N) and c["liger"]["ms"] < c["fast"]["ms"]}
    assert set(cells) == want and len(cells) == len(want)
    text = F.fast_backward_summary()
    for op, dt, M, N in cells:
        assert f"{'LayerNorm' if op == 'layer_norm' else 'RMSNorm'} {dt} {M}×{N}" in text


def test_backward_charts_plot_every_kernel_and_shape_of_the_record():
    d = F.load(F.FAST_BACKWARD)
    page = (ROOT / "docs/ladder/fast.md").read_text()
    for dtype in ("fp32", "bf16"):
        assert f"{{% fast_backward_chart {dtype} %}}" in page
        svg = F.fast_backward_chart(dtype)
        rows = [r for r in d["rows"] if r["dtype"] == dtype and r["method"] == "pipelined"]
        kernels = {r["kernel"] for r in rows}
        assert kernels == set(F.BACKWARD_ORDER)  # ours, torch's, Liger's for both ops, and the copy
        for k in kernels - {"copy"}:
            assert k in svg, k
        for r in rows:  # the data table under the chart holds every plotted number
            assert f">{r['gbps']:.0f}</td>" in svg, r
