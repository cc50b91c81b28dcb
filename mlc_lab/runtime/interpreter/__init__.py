"""The reference interpreter: runs a PrimFunc on numpy arrays, in place. Ground truth for every
backend and every schedule, so it follows the sequential semantics of the loop IR exactly.

Statements run in order. At each loop it meets, the interpreter first tries to run the whole
nest below it at once, vectorised with numpy (see ``grid``); when that would not give
the sequential result it steps the loop in Python and tries again at the loops inside. With
``vectorize=False`` it steps every loop, which is slow but a second, independent way to compute
the same answer.

    run(func, [a, b, c])                  # numpy arrays (or NDArrays), one per parameter
"""
from __future__ import annotations

import numpy as np

from ...ir import hooks
from ...tir import stmt as S
from ...tir.buffer import Buffer
from ...tir.functor import StmtExprVisitor
from . import grid
from .expr import Evaluator, Storage, and_mask, np_dtype
from ..module import bind_arguments


class Program:
    """A PrimFunc prepared for repeated runs: it remembers which loop nests can run as grids.
    Calling it checks the arguments, then runs the function on them in place."""

    def __init__(self, func, name: str | None = None):
        self.func = func
        self.name = name or func.attr_dict.get("global_symbol") or "main"
        self._nests: dict = {}
        stores = _StoredBuffers()
        stores.visit(func.body)
        self._written_params = [p for p in func.params
                                if isinstance(p, Buffer) and p in stores.buffers]

    def __call__(self, *args, vectorize: bool = True) -> None:
        values, env = bind_arguments(self.func, self.name, args)
        storages, copied = {}, []
        for param, value in zip(self.func.params, values):
            if not isinstance(param, Buffer):
                continue
            array = value
            if not (value.flags.c_contiguous and value.flags.writeable):
                array = np.ascontiguousarray(value).copy()  # work on a copy, written back below
                copied.append((param, value, array))
            storages[param] = Storage.of_array(param.name, array)
        if vectorize and _aliased([s.flat for s in storages.values()]):
            vectorize = False  # reordering is only proven safe for distinct buffers
        with np.errstate(all="ignore"):  # masked-off grid points may divide by zero etc.
            _Executor(self, storages, env, vectorize).exec(self.func.body)
        for param, original, array in copied:
            if param in self._written_params:
                if not original.flags.writeable:
                    raise ValueError(f"{self.name}(): parameter {param.name} is written but its "
                                     "array is read-only")
                np.copyto(original, array)

    def nest(self, loop: S.For):
        """Static facts about the nest under ``loop`` (None: never a grid), computed once."""
        if loop not in self._nests:
            self._nests[loop] = grid.analyse_nest(loop)
        return self._nests[loop]


def run(func, arrays, vectorize: bool = True) -> None:
    """Run ``func`` on ``arrays`` (one numpy array, NDArray or scalar per parameter), in place."""
    Program(func)(*arrays, vectorize=vectorize)


class _StoredBuffers(StmtExprVisitor):
    def __init__(self):
        self.buffers = set()

    def visit_BufferStore(self, store):
        self.buffers.add(store.buffer)
        self.generic_visit(store)


def _aliased(arrays: list) -> bool:
    return any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[:i])


_UNBOUND = object()


class _Executor:
    """Runs statements one after another; ``env`` holds the current value of every variable."""

    def __init__(self, program: Program, storages: dict, env: dict, vectorize: bool):
        self.program, self.storages, self.env = program, storages, dict(env)
        self.vectorize = vectorize
        self.ev = Evaluator(self.env, self.storages)

    def exec(self, s) -> None:
        method = _EXEC.get(type(s))
        if method is None:
            raise NotImplementedError(f"the interpreter cannot run {type(s).__name__} statements")
        method(self, s)

    def bind(self, var, value):
        previous = self.env.get(var, _UNBOUND)
        self.env[var] = value
        return previous

    def unbind(self, var, previous) -> None:
        if previous is _UNBOUND:
            del self.env[var]
        else:
            self.env[var] = previous

    def exec_SeqStmt(self, s) -> None:
        for stmt in s.seq:
            self.exec(stmt)

    def exec_For(self, loop) -> None:
        if self.vectorize:
            nest = self.program.nest(loop)
            if nest is not None and grid.run_nest(loop, nest, self.env, self.storages,
                                                  self.ev.block):
                return
        low, extent = int(self.ev.eval(loop.min)), int(self.ev.eval(loop.extent))
        make = np_dtype(loop.loop_var.dtype).type
        previous = self.env.get(loop.loop_var, _UNBOUND)
        for value in range(low, low + extent):
            self.env[loop.loop_var] = make(value)
            self.exec(loop.body)
        self.unbind(loop.loop_var, previous)

    def exec_BufferStore(self, store) -> None:
        storage = self.ev.storage(store.buffer)
        value = np.asarray(self.ev.eval(store.value)).astype(storage.flat.dtype, copy=False)
        position = self.ev.load_position(store)
        storage.flat[position] = value
        storage.mark_written(position)

    def exec_IfThenElse(self, s) -> None:
        if bool(self.ev.eval(s.condition)):
            self.exec(s.then_case)
        elif s.else_case is not None:
            self.exec(s.else_case)

    def exec_LetStmt(self, s) -> None:
        previous = self.bind(s.var, self.ev.eval(s.value))
        self.exec(s.body)
        self.unbind(s.var, previous)

    def exec_Evaluate(self, s) -> None:
        """Expressions have no side effects here (``T.evaluate(0)``, thread syncs): skip it. A
        ``T.call_extern`` is evaluated, so that a call made for its effect, which the interpreter
        cannot make, is refused rather than skipped."""
        if getattr(s.value, "op", None) == "call_extern":
            self.ev.eval(s.value)

    def exec_Allocate(self, s) -> None:
        self.allocate(s.buffer)
        self.exec(s.body)
        del self.storages[s.buffer]

    def exec_AllocateConst(self, s) -> None:
        shape = tuple(int(d.value) for d in s.buffer.shape)
        values = np.asarray(s.data, dtype=np_dtype(s.buffer.dtype)).reshape(shape)
        self.storages[s.buffer] = Storage.of_array(s.buffer.name, values)
        self.exec(s.body)
        del self.storages[s.buffer]

    def allocate(self, buffer) -> None:
        shape = tuple(int(self.ev.eval(d)) for d in buffer.shape)
        self.storages[buffer] = Storage.uninitialized(buffer.name, shape, buffer.dtype)

    def exec_BlockRealize(self, realize) -> None:
        block = realize.block
        values = [self.ev.eval(v) for v in realize.iter_values]
        saved = [(iv.var, self.bind(iv.var, np_dtype(iv.var.dtype).type(v)))
                 for iv, v in zip(block.iter_vars, values)]
        if bool(and_mask(True, self.ev.eval(realize.predicate))):
            outer_block, self.ev.block = self.ev.block, block.name_hint
            for buffer in block.alloc_buffers:
                self.allocate(buffer)
            for match in block.match_buffers:
                self.match_buffer(match)
            reduce_vars = [iv for iv in block.iter_vars if iv.iter_type == "reduce"]
            if block.init is not None and all(self.env[iv.var] == self.ev.eval(iv.dom.min)
                                              for iv in reduce_vars):
                self.exec(block.init)
            self.exec(block.body)
            for buffer in (*block.alloc_buffers, *(m.buffer for m in block.match_buffers)):
                del self.storages[buffer]
            self.ev.block = outer_block
        for var, previous in reversed(saved):
            self.unbind(var, previous)

    def match_buffer(self, match) -> None:
        """Make ``match.buffer`` a view of the source region (same storage, offset, strides),
        binding shape variables of the matched buffer from the region's extents."""
        source = self.ev.storage(match.source.buffer)
        mins = [int(self.ev.eval(r.min)) for r in match.source.region]
        extents = [int(self.ev.eval(r.extent)) for r in match.source.region]
        offset = source.offset + sum(m * s for m, s in zip(mins, source.strides))
        kept = list(zip(extents, source.strides))
        while len(kept) > match.buffer.ndim and kept and kept[0][0] == 1:
            kept.pop(0)  # a matched buffer may drop leading unit dimensions of the region
        if len(kept) != match.buffer.ndim:
            raise ValueError(f"match_buffer {match.buffer.name}: the region of "
                             f"{match.source.buffer.name} has {len(kept)} dimension(s), the buffer "
                             f"{match.buffer.ndim}")
        for dim, (extent, _) in zip(match.buffer.shape, kept):
            if type(dim).__name__ in ("Var", "SizeVar") and dim not in self.env:
                self.env[dim] = np_dtype(dim.dtype).type(extent)
            elif int(self.ev.eval(dim)) != extent:
                raise ValueError(f"match_buffer {match.buffer.name}: shape does not match the "
                                 f"region of {match.source.buffer.name} ({extents})")
        for stride, (_, actual) in zip(match.buffer.strides, kept):
            if type(stride).__name__ in ("Var", "SizeVar") and stride not in self.env:
                self.env[stride] = np_dtype(stride.dtype).type(actual)
        self.storages[match.buffer] = Storage(match.buffer.name, source.flat,
                                              tuple(e for e, _ in kept),
                                              tuple(s for _, s in kept), offset, source.written)


_EXEC = {S.SeqStmt: _Executor.exec_SeqStmt, S.For: _Executor.exec_For,
         S.BufferStore: _Executor.exec_BufferStore, S.IfThenElse: _Executor.exec_IfThenElse,
         S.LetStmt: _Executor.exec_LetStmt, S.Evaluate: _Executor.exec_Evaluate,
         S.Allocate: _Executor.exec_Allocate, S.AllocateConst: _Executor.exec_AllocateConst,
         S.BlockRealize: _Executor.exec_BlockRealize}


hooks.provide("runtime.interpreter", run)


__all__ = ["Program", "run"]
