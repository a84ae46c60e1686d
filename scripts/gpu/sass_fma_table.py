"""Which floating-point instructions the SASS of our kernels executes, per source line.

Usage (needs nvdisasm, e.g. from the CUDA toolkit or pip's nvidia-cuda-nvdisasm; no GPU):
    python scripts/gpu/sass_fma_table.py results/sass_fma_table.md [--arch sm_90] [--nvdisasm PATH]
        [--kernels all|forward|backward] [--save-sass DIR]

Compiles every kernel instantiation (reimpl.mirror.kernel_table.all_instantiations()) in one NVRTC program with
the mirror's numerics options plus -lineinfo, which adds line tables and leaves the machine code
as it is, disassembles it with `nvdisasm --print-line-info`, and lists, for each kernel and each
line of reimpl/mirror/cuda/*, the floating-point instructions that carry that line: FFMA/FMUL/FADD,
DFMA/DMUL/DADD, HADD2/HFMA2/HMUL2, MUFU.*, FCHK, conversions (F2F, F2FP, I2F, I2FP, F2I).
Instantiations with the same instructions on the same lines (counts aside) share one table.

How the output maps to the emulator's notes
-------------------------------------------
reimpl/emulator/layer_norm_kernel.py and welford.py note beside each statement what the SASS does
there ("# FFMA", "# FMUL; FADD", "# FADD; rsqrtf", ...); those notes were read off this kind of
listing. A line whose cell shows FFMA (and no separate FMUL and FADD) is one the emulator computes
with fp.fma (one rounding); a line with FMUL and FADD is computed as a product then a sum (two
roundings); DFMA is fp.fma64. The compiler's helper sequences are folded into one name so that
their own FFMAs are not read as contractions of the source line: `rcp.rn.f32` (IEEE 1.f/x:
MUFU.RCP, FFMA, FADD.FTZ, FFMA), `div.rn.f32` (IEEE x/y: MUFU.RCP, FCHK, 5 FFMA), `rsqrtf`
(MUFU.RSQ with FMULs by 2^24 and 2^12 for subnormal inputs), `rcp.rn.f64` (MUFU.RCP64H, 5 DFMA),
`div.rn.f64` (rcp.rn.f64, DMUL, 2 DFMA, FFMA range check), `rsqrt.f64` (MUFU.RSQ64H, DMUL, DFMA,
DFMA, DMUL, DFMA). These are correctly rounded as a whole (rsqrtf and rsqrt.f64 aside, which the
emulator takes from measured tables, reimpl/emulator/rsqrt.py), so the emulator uses NumPy's
IEEE division there. A statement written over several source lines has its instructions on
whichever of those lines the line table names: for the output statement at lines 326-327 of
vectorized_layer_norm_kernel_impl the FADD and FMUL sit on 326 and the FFMA that adds beta on 327,
which is the emulator's single note "# FADD; FMUL; FFMA"; read the rows of one statement together.
Integer division (I2F.U32.RP, MUFU.RCP, F2I) and constant loads through
HFMA2.MMA/HADD2 with no register source are left out. Instructions of the compiler's slow-path
subroutines ($__internal_*, taken for operands outside the fast path's range) carry no line and
are listed per subroutine at the end of each table. A line number is the one the cubin records,
so it refers to the sources as they were compiled; the source column shows that text.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from reimpl.mirror import kernel_table as K  # noqa: E402
from reimpl.device import compile as compile_mod, nvrtc  # noqa: E402

FP_OPS = re.compile(r"^(FFMA|FMUL|FADD|FFMA32I|FMUL32I|FADD32I|FMNMX|DFMA|DMUL|DADD|HFMA2|HADD2|HMUL2|"
                    r"MUFU|FCHK|F2F|F2FP|I2F|I2FP|F2I|FRND)(\.|$)")
INSN = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;")
LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
SECTION = re.compile(r"^//-+ \.text\.(\S+) -+")
SUBROUTINE = re.compile(r"^(\$__internal_\d+_\$(\S+)):")

# helper sequences, longest first: (name, tokens from the anchoring MUFU on, optional tokens before it)
TEMPLATES = [
    ("div.rn.f64", ["MUFU.RCP64H"] + ["DFMA"] * 5 + ["DMUL", "DFMA", "DFMA", "FFMA.RZ"], []),
    ("rcp.rn.f64", ["MUFU.RCP64H"] + ["DFMA"] * 5, []),
    ("rsqrt.f64", ["MUFU.RSQ64H", "DMUL", "DFMA", "DFMA", "DMUL", "DFMA"], []),
    ("div.rn.f32", ["MUFU.RCP", "FCHK"] + ["FFMA"] * 5, []),
    ("rcp.rn.f32", ["MUFU.RCP", "FFMA", "FADD.FTZ", "FFMA"], []),
    ("rsqrtf", ["MUFU.RSQ", "FMUL.2^12"], ["FMUL.2^24"]),
]


def token(op: str, operands: str) -> str | None:
    """The name an instruction goes by in the table, or None to leave it out."""
    if not FP_OPS.match(op):
        return None
    regs = re.findall(r"\bR\d+\b", operands)
    if op.startswith(("HFMA2", "HADD2", "HMUL2")) and len(regs) <= 1:
        return None  # a constant load into the destination register, no arithmetic
    if op.startswith("FMUL") and re.search(r",\s*16777216\b", operands):
        return "FMUL.2^24"
    if op.startswith("FMUL") and re.search(r",\s*4096\b", operands):
        return "FMUL.2^12"
    if op == "FFMA" and re.match(r"\s*R\d+,\s*RZ,", operands):
        return "FFMA.RZ"
    return op


def disassemble(cubin: Path, tool: str) -> str:
    return subprocess.run([tool, "--print-line-info", "-c", str(cubin)], check=True,
                          capture_output=True, text=True).stdout


def parse(sass: str) -> dict[str, dict]:
    """mangled kernel -> {"lines": {(file, line): [tokens in program order]}, "subs": {name: Counter}}"""
    out: dict[str, dict] = {}
    cur = None
    where = None
    sub = None
    pending_udiv = False
    for ln in sass.splitlines():
        m = SECTION.match(ln)
        if m:
            cur = out.setdefault(m.group(1), {"lines": defaultdict(list), "subs": defaultdict(Counter)})
            where, sub = None, None
            continue
        if cur is None:
            continue
        m = SUBROUTINE.match(ln)
        if m:
            sub = m.group(2)
            continue
        m = LINE.search(ln)
        if m:
            where = (Path(m.group(1)).name, int(m.group(2)))
            continue
        m = INSN.match(ln)
        if not m:
            continue
        op, operands = m.group(1), m.group(2)
        if op == "I2F.U32.RP":  # integer division idiom: drop it and its MUFU.RCP / F2I
            pending_udiv = True
            continue
        if pending_udiv and (op == "MUFU.RCP" or op.startswith("F2I")):
            if op.startswith("F2I"):
                pending_udiv = False
            continue
        tok = token(op, operands)
        if tok is None:
            continue
        if sub is not None:
            cur["subs"][sub][tok] += 1
        elif where is not None:
            cur["lines"][where].append(tok)
    return out


def fold(tokens: list[str]) -> list[str]:
    """Replace each helper sequence in one line's instruction stream by its name. A sequence is
    found from its MUFU on, as a multiset within a window, since the scheduler may reorder it."""
    used = [False] * len(tokens)
    items: list[tuple[int, str]] = []
    for i, tok in enumerate(tokens):
        if used[i] or not tok.startswith("MUFU"):
            continue
        for name, seq, before in TEMPLATES:
            if seq[0] != tok:
                continue
            need = Counter(seq[1:])
            picked = [i]
            for j in range(i + 1, min(len(tokens), i + 2 * len(seq) + 4)):
                if not used[j] and need[tokens[j]] > 0:
                    need[tokens[j]] -= 1
                    picked.append(j)
            if len(picked) != len(seq):
                continue
            for want in before:  # optional, just before the anchor
                for k in range(i - 1, max(-1, i - 6), -1):
                    if not used[k] and tokens[k] == want:
                        picked.append(k)
                        break
            for k in picked:
                used[k] = True
            items.append((i, name))
            break
    items += [(i, t) for i, t in enumerate(tokens) if not used[i]]
    return [t for _, t in sorted(items)]


def summarize(tokens: list[str]) -> list[tuple[str, int]]:
    """(name, count) by first appearance."""
    c = Counter(tokens)
    seen = []
    for t in tokens:
        if t not in seen:
            seen.append(t)
    return [(t, c[t]) for t in seen]


def source_lines() -> dict[str, list[str]]:
    return {p.name: p.read_text().splitlines() for p in sorted(K.SOURCE.directory.iterdir())
            if p.suffix in (".cu", ".cuh", ".h")}


def cell(text: str, width: int = 90) -> str:
    text = text.strip()
    if len(text) > width:
        text = text[:width - 1] + "…"
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`" if text else ""


def kernel_table(ks: list[K.Kernel], parsed: dict, lowered: dict, src: dict) -> dict:
    per_kernel = {}
    for k in ks:
        data = parsed[lowered[k.expr]]
        lines = {w: summarize(fold(toks)) for w, toks in data["lines"].items() if toks}
        per_kernel[k] = (lines, {s: sorted(c.items()) for s, c in data["subs"].items() if c})
    return per_kernel


CONVERSIONS = ("HADD2.F32", "F2FP.", "F2F.F16", "F2F.BF16")  # T's loads and stores (bfloat16 widens by a shift)


def is_conversion(name: str) -> bool:
    return name.startswith(CONVERSIONS)


def group_key(lines: dict, subs: dict) -> tuple:
    """Instantiations agree when the same lines carry the same arithmetic; T's conversions may differ."""
    arith = ((w, tuple(n for n, _ in s if not is_conversion(n))) for w, s in lines.items())
    return (tuple(sorted((w, a) for w, a in arith if a)),
            tuple(sorted((s, tuple(n for n, _ in c)) for s, c in subs.items())))


def counts_text(name: str, counts: list[int]) -> str:
    lo, hi = min(counts), max(counts)
    if hi == 1:
        return name
    return f"{name} ×{lo}" if lo == hi else f"{name} ×{lo}–{hi}"


def render(per_kernel: dict, src: dict, stamp: list[str]) -> str:
    groups: dict[tuple, list] = defaultdict(list)
    for k, (lines, subs) in per_kernel.items():
        groups[group_key(lines, subs)].append(k)
    out = ["# SASS floating-point instructions per source line", ""]
    out += stamp + [""]
    out += ["What each kernel instantiation executes, line by line of `reimpl/mirror/cuda/`: the floating-point",
            "instructions that carry the line in the cubin's line table. `×n` counts the instructions (loops",
            "unrolled by the compiler repeat them); `×a–b` is the range over the instantiations of a group.",
            "Instantiations whose lines carry the same arithmetic (counts aside) share a table; where the",
            "element type T changes only the loads and stores, the cell says which T converts how.",
            "Helper sequences are folded into one name (see the legend); `FMUL.2^24`/`FMUL.2^12` are rsqrtf's",
            "subnormal scalings, `FFMA.RZ` the f64 division's range check (0*a+b).", "",
            "Legend: `rcp.rn.f32` = MUFU.RCP, FFMA, FADD.FTZ, FFMA (IEEE 1.f/x); `div.rn.f32` = MUFU.RCP,",
            "FCHK, 5 FFMA (IEEE x/y); `rsqrtf` = MUFU.RSQ with FMULs by 2^24 and 2^12; `rcp.rn.f64` =",
            "MUFU.RCP64H, 5 DFMA; `div.rn.f64` = rcp.rn.f64, DMUL, 2 DFMA, FFMA.RZ; `rsqrt.f64` = MUFU.RSQ64H,",
            "DMUL, DFMA, DFMA, DMUL, DFMA. `HADD2.F32 Rd, -RZ, Rs.H0_H0` widens a half to float (exact);",
            "`F2FP.*`/`F2F.*` round to half or bfloat16; `I2FP`/`I2F` convert integers.", "",
            "## Groups", "", "| # | template | instantiations |", "| --- | --- | --- |"]
    ordered = sorted(groups.items(), key=lambda kv: (kv[1][0].template.name, str(kv[1][0])))
    for gi, (_, ks) in enumerate(ordered, 1):
        names = ", ".join(f"`{k.name}`" for k in ks) if len(ks) <= 4 else \
            f"{len(ks)}: " + ", ".join(f"`{k.name}`" for k in ks[:2]) + ", …"
        out.append(f"| [{gi}](#group-{gi}) | `{ks[0].template.name}` | {names} |")
    for gi, (_, ks) in enumerate(ordered, 1):
        out += ["", f"## Group {gi}: {ks[0].template.name} {{ #group-{gi} }}", ""]
        out.append(f"{len(ks)} instantiation{'s' if len(ks) > 1 else ''}: " + ", ".join(f"`{k.name}`" for k in ks))
        out += ["", "| line | source | SASS |", "| --- | --- | --- |"]
        all_lines = sorted({w for k in ks for w in per_kernel[k][0]}, key=lambda w: (w[0] != "layer_norm_kernel.cu", w))
        for w in all_lines:
            per = [dict(per_kernel[k][0].get(w, [])) for k in ks]
            first = next(p for p in per if p)
            names = [n for n in first if not is_conversion(n)]
            parts = [counts_text(n, [p[n] for p in per]) for n in names]
            convs = {}  # T -> {conversion: counts}
            for k, p in zip(ks, per):
                for n, c in p.items():
                    if is_conversion(n):
                        convs.setdefault(str(k.targs[0]), {}).setdefault(n, []).append(c)
            if convs:
                same = len({str(k.targs[0]) for k in ks}) == 1 or all(
                    len(v) == len(ks) for d in convs.values() for v in d.values()) and len(convs) == 1
                if same and len(convs) == 1:
                    parts += [counts_text(n, c) for n, c in next(iter(convs.values())).items()]
                else:
                    parts.append("T = " + "; ".join(f"{t}: " + ", ".join(counts_text(n, c) for n, c in d.items())
                                                   for t, d in sorted(convs.items())))
            text = src.get(w[0], [])
            line_text = text[w[1] - 1] if 0 < w[1] <= len(text) else ""
            out.append(f"| {w[0]}:{w[1]} | {cell(line_text)} | {', '.join(parts)} |")
        subs0 = per_kernel[ks[0]][1]
        for s in sorted(subs0):
            names = [n for n, _ in subs0[s]]
            parts = [counts_text(n, [dict(per_kernel[k][1][s])[n] for k in ks]) for n in names]
            out.append(f"| slow path | `{s}` | {', '.join(parts)} |")
    return "\n".join(out) + "\n"


def find_tool(name: str, given: str | None) -> str:
    for cand in ([given] if given else []) + [shutil.which(name), f"/usr/local/cuda/bin/{name}"]:
        if cand and Path(cand).exists():
            return cand
    sys.exit(f"{name} not found: install the CUDA toolkit or pip's nvidia-cuda-nvdisasm, or pass --nvdisasm")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvdisasm", default=None)
    ap.add_argument("--kernels", choices=("all", "forward", "backward"), default="all")
    ap.add_argument("--save-sass", type=Path, default=None, help="also keep the cubin and its listing here")
    args = ap.parse_args()
    tool = find_tool("nvdisasm", args.nvdisasm)
    ks = {"all": K.all_instantiations, "forward": K.forward_instantiations,
          "backward": K.backward_instantiations}[args.kernels]()
    prog = compile_mod.build(K.SOURCE, args.arch, ks, extra_options=("-lineinfo",))
    work = args.save_sass or Path("/tmp") / f"sass_fma_table_{args.arch}"
    work.mkdir(parents=True, exist_ok=True)
    cubin = work / "kernels_lineinfo.cubin"
    cubin.write_bytes(prog.cubin)
    sass = disassemble(cubin, tool)
    if args.save_sass:
        (work / "kernels_lineinfo.sass").write_text(sass)
    parsed = parse(sass)
    src = source_lines()
    per_kernel = kernel_table(ks, parsed, prog.lowered, src)
    tool_version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    digest = hashlib.sha256(prog.cubin).hexdigest()[:16]
    stamp = [f"Made by `python scripts/gpu/sass_fma_table.py {' '.join(sys.argv[1:])}` on "
             f"{datetime.date.today().isoformat()}: NVRTC {'.'.join(map(str, nvrtc.version()))}, "
             f"arch {args.arch}, options `{' '.join(compile_mod.NUMERICS_OPTIONS)} -lineinfo` (with the "
             f"usual `-std=c++17` and includes), nvdisasm `{tool_version}`.",
             f"{len(ks)} kernel instantiations; sources sha256 `{K.SOURCE.digest()[:16]}`, "
             f"cubin sha256 `{digest}`."]
    text = render(per_kernel, src, stamp)
    Path(args.out).write_text(text)
    print(f"wrote {args.out}: {len(ks)} kernels, {text.count('## Group ')} groups, {len(text)} bytes")


if __name__ == "__main__":
    main()
