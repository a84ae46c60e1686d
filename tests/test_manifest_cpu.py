"""CPU-only: reference/upstream.json and the sources agree: every mirrored upstream symbol has its
section in our code carrying its upstream line range and docs anchor, and nothing claims to mirror
upstream without being in the manifest."""
from reimpl.upstream import manifest


def test_manifest_and_sources_agree():
    assert manifest.check() == []


def test_manifest_pin_and_permalinks():
    m = manifest.load()
    assert m["commit"] == "70d99e998b4955e0049d13a98d77ae1b14db1f45" and m["torch"] == "2.11.0"
    link = manifest.permalink(m, "compute_stats")
    assert link.startswith("https://github.com/pytorch/pytorch/blob/70d99e998b4955e0049d13a98d77ae1b14db1f45/"
                           "aten/src/ATen/native/cuda/layer_norm_kernel.cu#L")


def test_forward_kernels_and_host_steps_are_all_mirrored():
    names = set(manifest.load()["symbols"])
    assert {"cuWelfordOnlineSum", "cuWelfordCombine", "compute_stats", "vectorized_layer_norm_kernel_impl",
            "vectorized_layer_norm_kernel_impl_double", "vectorized_layer_norm_kernel", "RowwiseMomentsCUDAKernel",
            "LayerNormForwardCUDAKernel", "WelfordDataLN", "aligned_vector", "WelfordData", "WelfordOps",
            "BlockReduce", "kCUDABlockReduceNumThreads", "WARP_SHFL_DOWN", "WARP_SHFL",
            "launch_vectorized_layer_norm_kernel", "LayerNormKernelImplInternal", "LayerNormKernelImpl",
            "RmsNormKernelImpl", "layer_norm_cuda", "_fused_rms_norm_cuda", "_check_layer_norm_inputs"} <= names


def test_upstream_order_is_kept():
    """Within each file, our sections come in upstream's order."""
    m = manifest.load()["symbols"]
    by_ours: dict[str, list[tuple[int, str]]] = {}
    for name, s in m.items():
        file, section = s["ours"].split(":")
        if s["file"].endswith("layer_norm_kernel.cu"):
            by_ours.setdefault(file, []).append((s["lines"][0], section))
    for file, items in by_ours.items():
        order = list(manifest.sections(manifest.ROOT / file))
        ours_order = [sec for sec in order if sec in {s for _, s in items}]
        assert ours_order == [s for _, s in sorted(items)], file
