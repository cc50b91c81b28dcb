"""Target "python" (also "numpy"): the reference interpreter runs the PrimFuncs as written; there
is nothing to lower (``Backend.lower`` only verifies them) or compile."""
from __future__ import annotations

from ..backend import Backend, Capabilities, register_backend


class PythonBackend(Backend):
    kind = "python"
    # The interpreter accepts every loop kind and keeps sequential semantics.
    capabilities = Capabilities(device_type="cpu", supports_parallel=True,
                                supports_nested_parallel=True, supports_vector=True,
                                supports_thread_binding=True)

    def render(self, functions, target=None) -> str:
        from ...ir import IRModule
        return IRModule(functions).script()

    def compile(self, functions, target):
        return functions

    def load(self, compiled, target, signatures):
        from ...runtime.interpreter import Program
        from ...runtime.module import Module
        return Module({name: Program(func, name) for name, func in compiled.items()}, self.kind)


register_backend(PythonBackend())
