"""Measure the GPU's rsqrtf for every input class the emulator needs; write reimpl/emulator's table.

Usage (on a CUDA machine with CuPy): python scripts/gpu/rsqrt_table.py reimpl/emulator/rsqrt_table.npz

Compiled through our NVRTC path with the mirror's numerics options (-ftz=false in particular: with
flush-to-zero the subnormal inputs would read as zero). Records, per reimpl/emulator/rsqrt.py:
  - all 2^24 (exponent parity, mantissa) inputs x0 in [1, 4), as differences from the reference;
  - all 2^23 - 1 positive subnormal inputs, the same way;
  - special inputs (+-0, +-inf, NaN, negative normals and subnormals) with their result bits;
  - a full check, on the GPU, that rsqrtf(x) == rsqrtf(x0) * 2^-k for every positive normal x.
"""
from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reimpl.device import compile as compile_mod, nvrtc  # noqa: E402
from reimpl.emulator.rsqrt import reference32  # noqa: E402

SOURCE = r"""
extern "C" __global__ void rsqrt_bits(const unsigned* in, unsigned* out, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float_as_uint(rsqrtf(__uint_as_float(in[i])));
}
// Every positive normal x = 4^k * x0: count those where rsqrtf(x) is not rsqrtf(x0) with its
// exponent lowered by k (the result stays normal: rsqrtf(x0) is in (0.5, 1], |k| <= 63).
extern "C" __global__ void check_scaling(unsigned long long* mismatches) {
  unsigned long long local = 0;
  for (unsigned long long b = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       b < (254ull << 23); b += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned bits = (unsigned)b + (1u << 23);            // exponent fields 1..254
    int e = (int)(bits >> 23) - 127;
    int parity = e & 1;
    int k = (e - parity) / 2;
    unsigned x0 = ((unsigned)(127 + parity) << 23) | (bits & 0x7FFFFFu);
    unsigned r0 = __float_as_uint(rsqrtf(__uint_as_float(x0)));
    unsigned want = r0 - ((unsigned)k << 23);
    if (__float_as_uint(rsqrtf(__uint_as_float(bits))) != want) local++;
  }
  if (local) atomicAdd(mismatches, local);
}
"""


def main(out_path: str) -> None:
    import cupy
    module, props, arch, options = compile_mod.load_probe(SOURCE, "rsqrt_table.cu")
    rsqrt_bits = module.get_function("rsqrt_bits")
    check_scaling = module.get_function("check_scaling")

    def gpu_rsqrtf(bits: np.ndarray) -> np.ndarray:
        d_in = cupy.asarray(bits.astype(np.uint32))
        d_out = cupy.empty_like(d_in)
        n = d_in.size
        rsqrt_bits(((n + 255) // 256,), (256,), (d_in, d_out, np.int64(n)))
        return cupy.asnumpy(d_out)

    def delta(inputs: np.ndarray) -> np.ndarray:
        got = gpu_rsqrtf(inputs).view(np.int32).astype(np.int64)
        ref = reference32(inputs.view(np.float32)).view(np.int32).astype(np.int64)
        d = got - ref
        assert np.abs(d).max() < 127, f"rsqrtf is {np.abs(d).max()} ulp from the reference"
        return d.astype(np.int8)

    man = np.arange(1 << 23, dtype=np.uint32)
    normal_delta = np.stack([delta((np.uint32(127 + p) << np.uint32(23)) | man) for p in (0, 1)])
    sub = man.copy()
    sub[0] = 1  # index 0 (+0) is a special case; keep the array dense
    subnormal_delta = delta(sub)
    subnormal_delta[0] = 0
    specials_in = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                            0xBF800000, 0x80000001, 0x807FFFFF, 0xFF7FFFFF, 0x00800000, 0x7F7FFFFF, 0x00000001],
                           dtype=np.uint32)
    specials_out = gpu_rsqrtf(specials_in)
    counter = cupy.zeros(1, dtype=cupy.uint64)
    check_scaling((props["multiProcessorCount"] * 8,), (256,), (counter,))
    mismatches = int(counter.get()[0])

    import torch
    meta = {"device": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
            "capability": f"{props['major']}.{props['minor']}", "arch": arch, "options": options,
            "nvrtc": list(nvrtc.version()), "cupy": cupy.__version__, "torch": torch.__version__,
            "numpy": np.__version__, "date": datetime.date.today().isoformat(),
            "reference": "float32(1 / sqrt(float64(x))) in NumPy"}
    np.savez_compressed(out_path, normal_delta=normal_delta, subnormal_delta=subnormal_delta,
                        specials_in=specials_in, specials_out=specials_out,
                        scaling_mismatches=np.int64(mismatches), meta=np.array(json.dumps(meta)))
    hist = {int(v): int(c) for v, c in zip(*np.unique(np.concatenate([normal_delta.ravel(), subnormal_delta]),
                                                        return_counts=True))}
    print(json.dumps({"out": out_path, "scaling_mismatches": mismatches, "delta_histogram": hist, **meta}, indent=1))
    if mismatches:
        sys.exit(f"rsqrtf(4x) != rsqrtf(x)/2 on {mismatches} inputs: the table does not describe this GPU")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
