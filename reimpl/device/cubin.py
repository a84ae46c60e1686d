"""Read facts off a compiled cubin without a GPU: each kernel's static shared memory (from the
ELF section `.nv.shared.<symbol>`) and its demangled name (through binutils' c++filt).
Launch plans add the static part to the dynamic `nshared`, as the profiler reports the sum.
"""
from __future__ import annotations

import shutil
import struct
import subprocess


def _sections(elf: bytes):
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab_off = headers[shstrndx][4]
    for h in headers:
        name_off = strtab_off + h[0]
        name = elf[name_off:elf.index(b"\0", name_off)].decode()
        yield name, h[5]  # sh_size


# sm_80 and later reserve 1 KiB of shared memory per block for the system; the linker puts it at the
# start of each kernel's `.nv.shared.<symbol>` section (and marks it with `.nv.shared.reserved.0`).
SYSTEM_RESERVED_SMEM = 1024


def static_shared_bytes(cubin: bytes) -> dict[str, int]:
    """Mangled kernel name -> bytes of statically declared __shared__ memory."""
    sections = list(_sections(cubin))
    reserved = SYSTEM_RESERVED_SMEM if any(n.startswith(".nv.shared.reserved") for n, _ in sections) else 0
    return {name[len(".nv.shared."):]: size - reserved
            for name, size in sections
            if name.startswith(".nv.shared.") and not name.startswith(".nv.shared.reserved")}


def demangle(names: list[str]) -> list[str]:
    """Itanium-demangle with c++filt (binutils ships with gcc)."""
    exe = shutil.which("c++filt")
    if exe is None:
        raise RuntimeError("c++filt not found (install binutils)")
    res = subprocess.run([exe], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    return res.stdout.splitlines()[:len(names)]
