"""``contrib.clang.create_llvm``: compile C/C++ source to LLVM IR text with the clang compiler.

mlc_lab does not ship clang; where it is on PATH the source is compiled, else the call says what
is missing. The course feeds the result to a ``pragma_import_llvm`` annotation to link a
hand-written kernel; in mlc_lab a tensor intrinsic's implementation is a T.prim_func instead."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile


def find_clang() -> str | None:
    """The clang executable on PATH (``clang``, or a versioned ``clang-NN``), or None."""
    found = shutil.which("clang")
    if found:
        return found
    for version in range(30, 9, -1):
        found = shutil.which(f"clang-{version}")
        if found:
            return found
    return None


def create_llvm(inputs, output: str | None = None, options=None, cc: str | None = None) -> str:
    """LLVM IR text of ``inputs`` (C/C++ source text, or a list of them), also written to
    ``output`` when given. ``options`` are extra compiler flags; ``cc`` the compiler to run."""
    cc = cc or find_clang()
    if cc is None:
        raise RuntimeError("contrib.clang.create_llvm needs the clang compiler, which is not on "
                           "PATH; install clang, or write the kernel as loops in a T.prim_func "
                           "(for a tensor intrinsic, as the impl given to tir.TensorIntrin.register)")
    sources = [inputs] if isinstance(inputs, str) else list(inputs)
    with tempfile.TemporaryDirectory(prefix="mlc_lab_clang_") as work:
        texts = []
        for index, source in enumerate(sources):
            src = os.path.join(work, f"input{index}.cc")
            dst = os.path.join(work, f"output{index}.ll")
            with open(src, "w") as f:
                f.write(source)
            command = [cc, "-S", "-emit-llvm", "-O2", src, "-o", dst, *(options or [])]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"clang failed on input {index}:\n{done.stderr.strip()}")
            with open(dst) as f:
                texts.append(f.read())
    text = "\n".join(texts)
    if output is not None:
        with open(output, "w") as f:
            f.write(text)
    return text


__all__ = ["create_llvm", "find_clang"]
