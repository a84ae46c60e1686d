"""The package's layers, in one table: which folder (or modules) each holds, what it is for, and
which layers it may import. The architecture page draws its diagram from this table and
tests/test_layers_cpu.py checks every import in the package (lazy ones too) against it.
Imports nothing, so anything may read it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    name: str
    # dotted module names, each also covering the modules inside it ("reimpl.device"), or "pkg.*"
    # for the modules inside a package but not the package itself
    modules: tuple[str, ...]
    folder: str                  # where a reader finds it
    purpose: str                 # one sentence
    may_import: tuple[str, ...]  # other layers (a layer may always import itself)


# Top to bottom: a layer may import only layers listed after it.
LAYERS = (
    Layer("cli", ("reimpl.cli", "reimpl.__main__"), "reimpl/cli.py",
          "The command line (`python -m reimpl`): the one entry point that reaches every layer, each lazily.",
          ("docsite", "testing", "checks", "emulator", "public", "fast", "ladder", "mirror", "upstream", "device")),
    Layer("docsite", ("reimpl.docsite",), "reimpl/docsite/",
          "Builds the reading site: MkDocs hooks, directives, diagrams, build-time traces, link checks.",
          ("testing", "checks", "emulator", "ladder", "mirror", "upstream")),
    Layer("testing", ("reimpl.testing",), "reimpl/testing/",
          "Judges a user's own kernel against torch's bits: the case matrix, the difference report, the "
          "diagnosis by variants of torch's computation, batch invariance, the pytest plugin.",
          ("checks", "emulator", "ladder", "mirror", "device")),
    Layer("checks", ("reimpl.checks",), "reimpl/checks/",
          "Holds the mirror to torch: case matrices, bit parity, torch's recorded launches, launch plans, "
          "benchmarks, the GPU's step trace.",
          ("emulator", "public", "fast", "ladder", "mirror", "upstream", "device")),
    Layer("emulator", ("reimpl.emulator",), "reimpl/emulator/",
          "The bit-exact CPU twin of every kernel, with step traces; it replays the host mirror's launches.",
          ("mirror", "device")),
    Layer("public", ("reimpl", "reimpl.api", "reimpl.autograd", "reimpl.functional", "reimpl.nn", "reimpl.ops",
                     "reimpl.aten_kernels", "reimpl.fast"),
          "reimpl/ (api, autograd, functional, nn, ops, aten_kernels) and reimpl/fast/__init__.py",
          "The public face: aten's contracts, autograd, torch.nn.functional's signatures, drop-in modules, "
          "the same ops registered with torch.library for torch.compile and torch.export, and our kernels "
          "installed as aten's own; each call names its kernels, the mirror's or the fast ones.",
          ("fast", "mirror", "device")),
    Layer("fast", ("reimpl.fast.*",), "reimpl/fast/ (all but __init__.py)",
          "A kernel provider beside the mirror: forward, dX, fused backward and dgamma/dbeta chains kernels "
          "of ours with torch's "
          "exact bits, launched by a runtime that the mirror's host dispatch runs under.",
          ("mirror", "device")),
    Layer("ladder", ("reimpl.ladder",), "reimpl/ladder/",
          "The study ladder: LayerNorm kernels from the textbook loop to apex's shape, one idea per rung.",
          ("device",)),
    Layer("mirror", ("reimpl.mirror",), "reimpl/mirror/",
          "Upstream's code under upstream's names: the host half in Python, the device half in CUDA.",
          ("device",)),
    Layer("upstream", ("reimpl.upstream",), "reimpl/upstream/",
          "The pinned upstream and its releases: the symbol-to-line-range manifest, the fetch of the upstream "
          "text, and each torch release's own layer_norm_kernel.cu kernels read off its wheel.",
          ("device",)),
    Layer("device", ("reimpl.device",), "reimpl/device/",
          "Device plumbing with nothing LayerNorm-specific: NVRTC, the cubin cache, runtimes, cubin reading.",
          ()),
)

BY_NAME = {layer.name: layer for layer in LAYERS}


def layer_of(module: str) -> str | None:
    """The layer a dotted module name belongs to (the longest matching entry wins); None outside
    reimpl, and for this table itself."""
    if module == "reimpl.layers":
        return None
    best, best_len = None, -1
    for layer in LAYERS:
        for m in layer.modules:
            if m.endswith(".*"):
                hit = module.startswith(m[:-1])
            else:
                # the package root names itself only: a new module must be placed in the table
                hit = module == m or (module.startswith(m + ".") and m != "reimpl")
            if hit and len(m) > best_len:
                best, best_len = layer.name, len(m)
    return best


def docstring_line(layer: Layer, submodules: bool = False) -> str:
    """The line each package's docstring holds about its layer (tests/test_layers_cpu.py checks it)."""
    who = "Submodules' layer" if submodules else "Layer"
    return f"{who}: {layer.name}. May import: {', '.join(layer.may_import) or 'nothing'}."
