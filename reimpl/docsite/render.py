"""Build-time expansion of the docs' directives, so that what can drift is generated from its source:

    {% symbol NAME %}        upstream permalink + our-source link (from reference/upstream.json) and our
                             code, included by snippet section (reimpl/docsite/source_links.py)
    {% diagram NAME %}       an inline SVG from reimpl.docsite.diagrams
    {% parity %}             tables from the committed GPU summaries in results/
                             (reimpl/docsite/parity_tables.py)
    {% numerics_example %}   results/numerics_example.json, or "not yet measured" (the same module)
    {% symbol_index %}       every manifest symbol with its docs anchor, upstream lines and our file
    {% layers %}             the package's layers (reimpl/layers.py): folder, purpose, what each may import
    {% ladder_* ARG %}, {% rung_index %}   the study ladder's tables, charts and rung index
                             (reimpl/docsite/ladder_tables.py)
    {% ladder_grid %}, {% ladder_grid_ncu %}, {% triton_plan %}, {% triton_wide %}, {% row_held_affine %}   the top rungs
                             over the shared grid, their profile, the Triton plan's probe and the held
                             rung's fused affine step (reimpl/docsite/grid_tables.py)
    {% ladder_backward_grid %}, {% ladder_backward DTYPE %}, {% ladder_backward_verdict %}, {% backward_probe %},
    {% triton_backward_resources %}
                             the backward rungs
                             over the shared grid and the CUDA backward's probe (reimpl/docsite/backward_tables.py)
    {% apex_real %}          the apex rung beside apex's own build and torch (reimpl/docsite/apex_tables.py)
    {% fast_* ARG %}, {% ladder_ncu PASS %}   reimpl.fast's page (reimpl/docsite/fast_tables.py)
    {% fused_probe %}, {% fused_ncu %}, {% fused_sweep %}   its fused backward (reimpl/docsite/fused_tables.py)
    {% backward_routes %}, {% chains_probe DTYPE %}, {% chains_summary %}, {% chains_ncu %}   its chains
                             kernel and the backward's routes (reimpl/docsite/chains_tables.py)
    {% fast_probe PART KERNEL ... %}, {% fast_probe_ncu %}   the fast forward's knobs (forward_probe_tables.py)
    {% releases %}, {% releases_gpu %}, {% releases_copies %}, {% releases_host %}, {% releases_host_changes %},
    {% releases_what_you_get %}, {% large_tensor %}   the torch release matrix, the host dispatch read from
                             newer copies, inputs past 2^32 elements (reimpl/docsite/releases_table.py)
    {% host_overhead OP %}, {% host_over %}, {% host_profile [autograd] %}, {% host_parts %}, {% host_steps %},
    {% host_steps_summary %}, {% step_split %}, {% host_floor %}, {% cpp_node %}, {% host_native %}, {% host_native_steps %}, {% training_step_native %},
    {% training_step %}, {% training_step_repeat %}, {% compiled_step %}, {% compiled_profile %}
                             host time per call, where it goes, forward+backward steps, and a whole
                             model's training step (reimpl/docsite/host_table.py)
    {% siblings_* %}, {% softmax_errors %}, {% batchnorm_errors %}, {% merge_order %}
                             BatchNorm's and softmax's pages (reimpl/docsite/siblings_tables.py)
    {% judge_* %}, {% batch_invariance %}   "Test your kernel against torch" (reimpl/docsite/judge_tables.py)
    {% stepper PRESET %}     the in-page trace player of one preset input (reimpl/docsite/stepper.py)

Each directive sits alone on its line. An unknown directive is an error, so a typo fails the build.
"""
from __future__ import annotations

import re

from ..layers import LAYERS
from ..upstream import manifest as manifest_mod
from . import (apex_tables, backward_tables, bn_routes, chains_tables, fast_tables, forward_probe_tables, fused_tables,
               grid_tables, host_table, judge_tables, ladder_tables, releases_table, siblings_tables)
from .diagrams import DIAGRAMS
from .parity_tables import numerics_example, parity
from .source_links import symbol, symbol_index

# {% name %} or {% name ARG %}, where ARG may hold spaces ("fp32 flushed"); alone on its line
DIRECTIVE = re.compile(r"^\{% (\w+)(?: ([\w.]+(?: [\w.]+)*))? %\}$", re.M)


def layers_table() -> str:
    rows = ["| layer | where | what it holds | may import |", "|---|---|---|---|"]
    for layer in LAYERS:
        may = ", ".join(layer.may_import) or "nothing else of reimpl"
        rows.append(f"| **{layer.name}** | `{layer.folder}` | {layer.purpose} | {may} |")
    return "\n".join(rows) + "\n"


def expand(markdown: str, page: str, root: str, m: dict | None = None) -> str:
    """Replace every directive in `markdown` (the text of docs page `page`; `root` is the relative URL
    from that page to the site root)."""
    m = m or manifest_mod.load()

    def one(match: re.Match) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind == "symbol" and arg:
            return symbol(m, arg, page)
        if kind == "diagram" and arg in DIAGRAMS:
            return f'<div class="diagram-box">{DIAGRAMS[arg](root)}</div>'
        if kind == "parity" and not arg:
            return parity()
        if kind == "numerics_example" and not arg:
            return numerics_example()
        if kind == "host_overhead" and arg in host_table.OPS:
            return host_table.host_table(host_table.load(), arg)
        if kind == "host_profile" and arg in (None, "autograd"):
            return host_table.host_profile(host_table.load(), arg or "")
        if kind == "host_parts" and not arg:
            return host_table.host_parts(host_table.load())
        if kind == "host_over" and not arg:
            return host_table.host_over(host_table.load())
        if kind == "training_step" and not arg:
            return host_table.training_step()
        if kind == "training_step_repeat" and not arg:
            return host_table.training_step_repeat()
        if kind == "cpp_node" and not arg:
            return host_table.cpp_node()
        if kind == "host_native_steps" and not arg:
            return host_table.host_native_steps(host_table.load(), host_table.load(host_table.NATIVE))
        if kind == "training_step_native" and not arg:
            return host_table.training_step(host_table.TRAINING_NATIVE)
        if kind == "host_native" and not arg:
            return host_table.host_native(host_table.load(), host_table.load(host_table.NATIVE))
        if kind == "host_floor" and not arg:
            return host_table.host_floor(host_table.load(host_table.FLOOR))
        if kind == "compiled_step" and not arg:
            return host_table.compiled_step()
        if kind == "compiled_profile" and not arg:
            return host_table.compiled_profile()
        if kind == "host_steps" and not arg:
            return host_table.host_steps(host_table.load())
        if kind == "host_steps_summary" and not arg:
            return host_table.host_steps_summary(host_table.load())
        if kind == "step_split" and not arg:
            return host_table.step_split(host_table.load_split())
        if kind == "symbol_index" and not arg:
            return symbol_index(m, page)
        if kind == "layers" and not arg:
            return layers_table()
        if kind == "ladder_errors" and arg:
            return ladder_tables.errors(arg)
        if kind == "ladder_bandwidth" and arg:
            return ladder_tables.bandwidth(arg)
        if kind == "ladder_training" and arg:
            return ladder_tables.training(arg)
        if kind == "ladder_chart" and arg:
            return f'<div class="diagram-box">{ladder_tables.chart(arg)}</div>'
        if kind == "ladder_stamp" and not arg:
            return ladder_tables.stamp()
        if kind == "ladder_grid" and not arg:
            return grid_tables.table()
        if kind == "ladder_grid_ncu" and not arg:
            return grid_tables.ncu_table()
        if kind == "row_held_affine" and not arg:
            return grid_tables.affine_table()
        if kind == "triton_plan" and not arg:
            return grid_tables.triton_plan()
        if kind == "triton_wide" and not arg:
            return grid_tables.triton_wide()
        if kind == "ladder_backward_grid" and not arg:
            return backward_tables.grid_table()
        if kind == "ladder_backward" and arg in ladder_tables.ITEMSIZE:
            return backward_tables.cells_table(arg)
        if kind == "ladder_backward_verdict" and not arg:
            return backward_tables.verdict()
        if kind == "triton_backward_resources" and not arg:
            return backward_tables.triton_resources_table()
        if kind == "backward_probe" and not arg:
            return backward_tables.probe_table()
        if kind == "apex_real" and not arg:
            return apex_tables.table()
        if kind == "rung_index" and not arg:
            return ladder_tables.rung_index(markdown)
        if kind == "releases" and not arg:
            return releases_table.summary()
        if kind == "releases_gpu" and not arg:
            return releases_table.gpu_families()
        if kind == "releases_copies" and not arg:
            return releases_table.host_copies()
        if kind == "releases_host" and not arg:
            return releases_table.host_functions()
        if kind == "releases_host_changes" and not arg:
            return releases_table.host_changes()
        if kind == "releases_what_you_get" and not arg:
            return releases_table.release_table()
        if kind == "large_tensor" and not arg:
            return releases_table.large_tensor()
        if kind == "fast_bandwidth" and arg:
            return fast_tables.fast_bandwidth(arg)
        if kind == "fast_chart" and arg:
            return fast_tables.fast_chart(arg)
        if kind == "ladder_ncu" and arg in fast_tables.NCU:
            return fast_tables.ncu(arg)
        if kind == "fast_experiments" and not arg:
            return fast_tables.fast_experiments()
        if kind == "fast_rows_sweep" and not arg:
            return fast_tables.fast_rows_sweep()
        if kind == "fast_grad_bandwidth" and arg:
            return fast_tables.fast_grad_bandwidth(arg)
        if kind == "fast_grad_chart" and arg:
            return fast_tables.fast_grad_chart(arg)
        if kind == "fast_backward_chart" and arg:
            return fast_tables.fast_backward_chart(arg)
        if kind == "fast_backward" and arg:
            return fast_tables.fast_backward(arg)
        if kind == "fast_backward_summary" and not arg:
            return fast_tables.fast_backward_summary()
        if kind == "fast_grid" and arg:
            return fast_tables.fast_grid(arg)
        if kind == "fast_grid_summary" and not arg:
            return fast_tables.fast_grid_summary()
        if kind == "fast_gain" and arg:
            return fast_tables.fast_gain(arg)
        for module in (forward_probe_tables, fused_tables, chains_tables, siblings_tables, bn_routes, judge_tables):
            out = module.expand(kind, arg)  # None: not one of that module's directives
            if out is not None:
                return out
        if kind == "stepper" and arg:
            from .stepper import stepper
            return stepper(arg, root)
        raise ValueError(f"{page}: unknown directive {match.group(0)!r}")

    return DIRECTIVE.sub(one, markdown)
