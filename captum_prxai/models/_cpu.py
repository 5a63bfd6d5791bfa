"""Which CPU kernels a process computes with, and pinning them to AVX2.

A seeded CPU training run gives bit-identical weights when repeated on one
machine, and other weights on other machines: three libraries inside PyTorch
pick their kernels by the CPU they find, and each choice rounds differently
(``benchmarks/train_reproducibility.py`` measures each one). Pinning all three
to AVX2 takes the CPU's wider instruction sets (AVX-512) out of the result, so
that x86-64 CPUs with AVX2 can run the same kernels; whether two CPUs then
give the same weights is what the benchmark's log records, CPU by CPU:

- ATen's vectorised kernels: ``ATEN_CPU_CAPABILITY``;
- oneMKL's matrix products: ``MKL_CBWR`` (MKL's conditional numerical
  reproducibility);
- oneDNN's kernels: ``ONEDNN_MAX_CPU_ISA``.

Each library reads its variable once, at its first use in the process, so the
variables must be set before the process computes anything; setting them later
changes nothing, without a word. :func:`pinning_problem` catches that case
through ATen's capability, which PyTorch reports; on a CPU whose own kernels
are AVX2, a late oneMKL or oneDNN setting cannot be seen that way.
"""

from __future__ import annotations

import os
import platform
from typing import Dict, List, Optional

#: The environment that pins the three kernel choices to AVX2.
PINNED_ENV: Dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}


def _processor() -> str:
    """The CPU's model name, vendor, family and model numbers (``/proc/cpuinfo`` where there is one)."""
    fields: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return platform.processor() or platform.machine()
    parts = [fields.get("model name", ""), fields.get("vendor_id", "")]
    if "cpu family" in fields:
        parts.append(f"family {fields['cpu family']} model {fields.get('model', '?')}")
    return ", ".join(p for p in parts if p) or platform.machine()


def cpu_numerics() -> Dict[str, Optional[str]]:
    """What decides this process's CPU rounding: ATen's kernel capability, the pins, the processor.

    Returns:
        ``{"capability": "AVX512", "ATEN_CPU_CAPABILITY": None, "MKL_CBWR": None,
        "ONEDNN_MAX_CPU_ISA": None, "processor": "..."}``; a variable that is
        not set is ``None``. Calling this fixes ATen's capability for the
        process, as any computation would.
    """
    import torch

    out: Dict[str, Optional[str]] = {"capability": torch.backends.cpu.get_cpu_capability()}
    out.update({name: os.environ.get(name) for name in PINNED_ENV})
    out["processor"] = _processor()
    return out


def missing_pins() -> List[str]:
    """The pins of :data:`PINNED_ENV` this process's environment lacks, as ``NAME=value``."""
    return [f"{k}={v}" for k, v in PINNED_ENV.items() if os.environ.get(k) != v]


def pinning_problem() -> Optional[str]:
    """Why this process's CPU kernels are not pinned to AVX2, or ``None`` when they are.

    Returns:
        A message naming what is missing: a variable that is not set as in
        :data:`PINNED_ENV`, or ATen running kernels other than AVX2 (the
        variables came too late, or the CPU has no AVX2).
    """
    wrong = missing_pins()
    pins = " ".join(f"{k}={v}" for k, v in PINNED_ENV.items())
    if wrong:
        return (f"pinned kernels need {' '.join(wrong)} in the environment before the process starts "
                f"(run it as `{pins} python ...`, or use `captum-prxai train --pin-kernels`, which sets them)")
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX2":
        if capability in ("DEFAULT", "NO AVX") or platform.machine().lower() not in ("x86_64", "amd64"):
            return f"pinned kernels need an x86-64 CPU with AVX2; this one runs {capability} kernels"
        return (f"pinned kernels: PyTorch already chose {capability} kernels before {pins} were set; "
                "set them before the process starts (a fresh process, e.g. `captum-prxai train --pin-kernels`)")
    return None
