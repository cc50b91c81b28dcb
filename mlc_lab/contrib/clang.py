"""``contrib.clang.create_llvm``: compile C/C++ source to LLVM IR text with the clang compiler.

mlc_lab does not ship clang; where it is on PATH the source is compiled, else the call says what
is missing. The result, given to a loop as its ``pragma_import_llvm`` annotation, is linked into
the program the llvm target builds, so a hand-written kernel can be called with T.call_extern."""
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


def create_llvm(inputs, output: str | None = None, options=None, cc: str | None = "clang") -> str:
    """LLVM IR text of ``inputs`` (C/C++ source text or the path of a source file, or a list of
    them), compiled by clang at -O2 for the host's target triple, and also written to ``output``
    when given. ``options`` are extra compiler flags; ``cc`` the compiler to run (when it is
    "clang" and no plain ``clang`` is on PATH, a versioned ``clang-NN`` is used).

    A loop annotated ``pragma_import_llvm`` with the text links it into the program built with
    target "llvm", so that ``T.call_extern`` reaches the functions it defines."""
    found = find_clang() if cc in (None, "clang") else shutil.which(cc)
    if found is None:
        raise RuntimeError(f"contrib.clang.create_llvm needs the clang compiler, which is not on "
                           f"PATH (looked for {cc or 'clang'!r}); install clang (e.g. "
                           "`apt-get install clang`), or write "
                           "the kernel as loops in a T.prim_func (for a tensor intrinsic, as the "
                           "impl given to tir.TensorIntrin.register)")
    import llvmlite.binding as llvm   # the host's triple, as the JIT compiles for it
    sources = [inputs] if isinstance(inputs, str) else list(inputs)
    with tempfile.TemporaryDirectory(prefix="mlc_lab_clang_") as work:
        texts = []
        for index, source in enumerate(sources):
            if "\n" not in source and os.path.isfile(source):
                src = source
            else:
                src = os.path.join(work, f"input{index}.cc")
                with open(src, "w") as f:
                    f.write(source)
            dst = os.path.join(work, f"output{index}.ll")
            command = [found, "-S", "-emit-llvm", "-O2", f"--target={llvm.get_process_triple()}",
                       *(options or []), src, "-o", dst]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"clang failed on input {index}:\n{done.stderr.strip()}")
            with open(dst) as f:
                texts.append(f.read())
    text = texts[0] if len(texts) == 1 else _linked(texts)
    if output is not None:
        with open(output, "w") as f:
            f.write(text)
    return text


def _linked(texts: list) -> str:
    """One module of several modules' IR (each defines its own functions), as LLVM links them."""
    import llvmlite.binding as llvm
    modules = [llvm.parse_assembly(t) for t in texts]
    for other in modules[1:]:
        modules[0].link_in(other)
    return str(modules[0])


__all__ = ["create_llvm", "find_clang"]
