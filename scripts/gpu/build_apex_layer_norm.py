"""Build NVIDIA apex's fused LayerNorm extension (fused_layer_norm_cuda) on the GPU machine, as apex's
setup.py builds it: nvcc -maxrregcount=50 -O3 --use_fast_math, C++ -O3, for this GPU's architecture
only. The GPU machine has no network: apex's four source files (csrc/layer_norm_cuda.cpp,
layer_norm_cuda_kernel.cu, type_shim.h, static_switch.h, and a file COMMIT naming apex's commit)
travel in the ignored folder .whl/apex. setuptools' own compiler driver builds it (no ninja needed).
reimpl.checks.peers.apex_layer_norm imports the result from REIMPL_APEX_DIR=DEST.
Usage, from the repository root: python scripts/gpu/build_apex_layer_norm.py DEST [SRC=.whl/apex]"""
import os
import shutil
import sys
from pathlib import Path


def main(dest: str, src: str = ".whl/apex") -> None:
    import torch
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    dest_p, src_p = Path(dest).resolve(), Path(src).resolve()
    dest_p.mkdir(parents=True, exist_ok=True)
    shutil.copy(src_p / "COMMIT", dest_p / "COMMIT")
    major, minor = torch.cuda.get_device_capability()
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    ext = CUDAExtension(name="fused_layer_norm_cuda",
                        sources=[str(src_p / "csrc" / "layer_norm_cuda.cpp"),
                                 str(src_p / "csrc" / "layer_norm_cuda_kernel.cu")],
                        extra_compile_args={"cxx": ["-O3"], "nvcc": ["-maxrregcount=50", "-O3", "--use_fast_math"]})
    setup(name="apex_fused_layer_norm", ext_modules=[ext],
          cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
          script_args=["build_ext", "--build-lib", str(dest_p), "--build-temp", str(dest_p / "build")])
    print("built", *dest_p.glob("fused_layer_norm_cuda*.so"))


if __name__ == "__main__":
    main(*sys.argv[1:])
