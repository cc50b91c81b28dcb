"""tir.Schedule: transform a module step by step with primitives; every step is traced."""
from __future__ import annotations

import difflib

import numpy as np

from ..._env import debug_enabled
from ...ir import hooks
from ...ir.module import IRModule
from .. import stmt as S
from ..function import PrimFunc
from ..verify import VerifyError, verify, verify_block_names
from . import errors
from .errors import ScheduleError  # noqa: F401  (tvm.tir.schedule.schedule.ScheduleError)
from .instruction import instruction
from .func_index import FuncIndex, child_blocks, replace_stmts
from .rv import BlockRV, LoopRV, SampledInt
from .state import ScheduleState, StmtSRef
from .trace import Trace


class Step:
    """One entry of ``sch.history``: the primitive call (as Python) and the module after it.
    The call is printed when first read (from the trace's first ``trace_length``
    instructions): search builds thousands of schedules whose history nobody reads."""
    __slots__ = ("_call", "mod", "_trace", "_length")

    def __init__(self, call: str | None, mod: IRModule, trace=None, trace_length: int = 0):
        self._call, self.mod, self._trace, self._length = call, mod, trace, trace_length

    @property
    def call(self) -> str:
        if self._call is None:
            self._call = Trace(self._trace.insts[:self._length]).as_python()[-1]
        return self._call

    def __repr__(self) -> str:
        return f"Step(call={self.call!r})"


class ScheduleBase:
    """State, handles and queries. The primitives live in mixins, one file per family.

    ``check_numerics=True`` runs the program after every step and raises NumericsChangedError
    when a step changed its results. ``debug_mask`` ("all" or a non-zero int, as in TVM, where
    the bits pick checks; here every value turns on the one check there is) verifies the module
    when the schedule is created and after every step, and names the step that broke it; None
    follows the MLC_LAB_DEBUG environment variable, 0 or "none" turns it off.
    ``error_render_level``: how errors read, "detail" (the rule and the function with the culprit
    underlined), "fast" (the error's one-line summary, nothing printed) or "none".
    """

    def __init__(self, mod, *, seed: int | None = None, check_numerics: bool = False,
                 debug_mask=None, error_render_level: str = "detail"):
        if isinstance(mod, PrimFunc):
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise TypeError(f"tir.Schedule expects an IRModule or PrimFunc, got {type(mod).__name__}")
        if error_render_level not in errors.RENDER_LEVELS:
            raise ValueError(f'tir.Schedule: error_render_level can be "detail", "fast", or "none", '
                             f"got {error_render_level!r}")
        self._error_render_level = error_render_level
        self.verify_steps = _verify_steps(debug_mask)
        if self.verify_steps:
            verify(mod)
        verify_block_names(mod)   # handles name blocks: a repeated name would be ambiguous
        self._mod = mod
        self.trace = Trace()
        self.history: list[Step] = [Step("# initial module", mod)]
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self.check_numerics = check_numerics
        self._reference_results: dict = {}
        self._last_decision = None
        # (function, block name) -> the name a primitive gave that block (decompose_reduction's
        # "<name>_update"), so handles taken before the rename still find it.
        self._renamed: dict = {}
        # id -> handle: the BlockRVs/LoopRVs this schedule's instructions made (a handle that
        # names nothing and is not one of them comes from elsewhere), and those remove_rv dropped.
        self._made: dict = {}
        self._removed: dict = {}
        self._func_working_on: str | None = None
        self._state: ScheduleState | None = None

    # -- the module ------------------------------------------------------------------------
    @property
    def mod(self) -> IRModule:
        return self._mod

    def show(self, **kwargs) -> None:
        self._mod.show(**kwargs)

    def copy(self) -> "ScheduleBase":
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.trace = Trace(list(self.trace.insts))
        other.history = list(self.history)
        other._rng = np.random.default_rng(self._rng.integers(2**63))
        other._reference_results = dict(self._reference_results)
        other._renamed = dict(self._renamed)
        other._made, other._removed = dict(self._made), dict(self._removed)
        other._state = None   # the copy gets srefs of its own
        return other

    def _default_func_name(self) -> str:
        """The function a query without ``func_name`` means: the one ``work_on`` chose, else
        "main", else the only PrimFunc."""
        if self._func_working_on is not None:
            return self._func_working_on
        names = [gv.name_hint for gv in self._mod.functions
                 if isinstance(self._mod[gv], PrimFunc)]
        if "main" in names or len(names) == 0:
            return "main"
        if len(names) == 1:
            return names[0]
        raise errors.UnknownFunctionError(
            "get_block", f"the schedule does not know which function to be working on: the module "
            f"has {', '.join(names)} and none is called main; call sch.work_on(func_name) or pass "
            "func_name")

    @property
    def func_working_on(self):
        """The GlobalVar of the function queries without ``func_name`` use (None when the module
        has several functions, none of them "main", and ``work_on`` has not chosen one)."""
        try:
            name = self._default_func_name()
        except errors.UnknownFunctionError:
            return None
        return self._mod.get_global_var(name) if name in self._mod else None

    @instruction
    def work_on(self, func_name: str) -> None:
        """Make ``func_name`` the function that ``get_block`` (without ``func_name``) looks in.

        Raises: BlockNotFoundError when the module has no such function.

        Example:

        >>> @T.prim_func
        ... def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        ...     for i in range(4):
        ...         with T.block("add"):
        ...             vi = T.axis.spatial(4, i)
        ...             B[vi] = A[vi] + T.float32(1)
        >>> mod = mlc_lab.IRModule({"add": add, "add_2": add})
        >>> sch = tir.Schedule(mod)
        >>> sch.work_on("add_2")
        >>> sch.get_block("add").func_name, sch.func_working_on
        ('add_2', I.GlobalVar('add_2'))
        """
        if not isinstance(func_name, str) or not isinstance(self._mod[func_name] if func_name in
                                                            self._mod else None, PrimFunc):
            raise errors.BlockNotFoundError(
                "work_on", f"the module has no PrimFunc {func_name!r}; it has "
                f"{', '.join(gv.name_hint for gv in self._mod.functions)}")
        self._func_working_on = func_name

    @instruction
    def enter_postproc(self) -> None:
        """Mark where postprocessing starts: a trace replayed or simplified with
        ``remove_postproc=True`` stops here. Changes nothing."""
        return None

    # -- the reference compiler's view: srefs ------------------------------------------------
    @property
    def state(self) -> ScheduleState:
        """The ScheduleState of this schedule: srefs to its loops and blocks, the block scopes
        and cached flags, following the module as the primitives change it."""
        if self._state is None:
            self._state = ScheduleState._following(self)
        return self._state

    def get_sref(self, rand_var_or_stmt) -> StmtSRef | None:
        """The sref of a BlockRV (or block name), LoopRV, Block or For of the current module.

        Raises: UnknownHandleError (an IndexError too) for a handle this schedule did not make
        or removed; InvalidHandleError for a handle whose block or loop is gone."""
        target = rand_var_or_stmt
        if isinstance(target, LoopRV):
            target = self._resolve_loop(target, "get_sref", "rand_var_or_stmt")[1]
        elif isinstance(target, (BlockRV, str)):
            target = self._resolve_block(target, "get_sref", "rand_var_or_stmt")[1].block
        elif not isinstance(target, (S.Block, S.For, S.BlockRealize)):
            raise TypeError(f"sch.get_sref expects a BlockRV, LoopRV, Block or For, got "
                            f"{type(target).__name__}: {target!r}")
        return self.state.get_sref(target)

    def remove_rv(self, rand_var) -> None:
        """Forget a handle (BlockRV, LoopRV or sampled value): using it afterwards raises
        UnknownHandleError (an IndexError). The module does not change."""
        self._made.pop(id(rand_var), None)
        self._removed[id(rand_var)] = rand_var

    def _adopt(self, mod: IRModule, call: str) -> None:
        """Install ``mod`` made outside the primitives (``sch.state.replace``)."""
        self._mod = mod
        self.history.append(Step(call, mod))

    def _unknown(self, rv, primitive: str, param: str) -> None:
        """Raise UnknownHandleError when ``rv`` was removed or never bound."""
        unbound = (isinstance(rv, BlockRV) and rv.name is None) or (isinstance(rv, LoopRV) and rv.var is None)
        if unbound or id(rv) in self._removed:
            why = ("is unbound (a BlockRV()/LoopRV() that no instruction made)" if unbound else
                   "was removed with sch.remove_rv")
            raise errors.UnknownHandleError(primitive, f"parameter {param!r}: the handle {rv!r} {why}")

    def _func(self, func_name: str) -> PrimFunc:
        return self._mod[func_name]

    def _index(self, func_name: str) -> FuncIndex:
        # Functions are immutable and every primitive installs a new one, so the index of the
        # last function asked about stays right for as long as that very object is current.
        func = self._mod[func_name]
        cached = self.__dict__.get("_index_cache")
        if cached is not None and cached[0] is func:
            return cached[1]
        index = FuncIndex(func)
        self._index_cache = (func, index)
        return index

    def _update(self, func_name: str, new_func: PrimFunc, primitive: str) -> None:
        """Install ``new_func``; in debug mode first verify it, with check_numerics first prove it
        computes the same results."""
        if self.verify_steps:
            try:
                verify(new_func)
                verify_block_names(new_func)
            except VerifyError as err:
                raise VerifyError(f"sch.{primitive} produced ill-formed IR: {err}", err.func_name,
                                  err.node, err.rule) from None
        if self.check_numerics:
            self._check_numerics(func_name, new_func, primitive)
        self._mod = self._mod.with_function(func_name, new_func)

    def _replace(self, func_name: str, replacements: dict, primitive: str) -> PrimFunc:
        func = self._func(func_name)
        cached = self.__dict__.get("_index_cache")
        new_func = replace_stmts(func, replacements, cached[1] if cached and cached[0] is func else None)
        self._update(func_name, new_func, primitive)
        return new_func

    # -- handles ---------------------------------------------------------------------------
    def _resolve_block(self, block, primitive: str, param: str = "block"):
        """(func_name, BlockRealize, FuncIndex) for a BlockRV or block name."""
        if isinstance(block, str):
            block = self.get_block.__wrapped__(self, block)
        if not isinstance(block, BlockRV):
            raise TypeError(f"sch.{primitive}: parameter '{param}' expects a BlockRV (from "
                            f"sch.get_block), got {type(block).__name__}: {block!r}")
        self._unknown(block, primitive, param)
        index = self._index(block.func_name) if block.func_name in self._mod else None
        name = block.name
        while index is not None and name not in index.blocks and (block.func_name, name) in self._renamed:
            name = self._renamed[(block.func_name, name)]
        realize = None if index is None else index.blocks.get(name)
        if realize is None:
            if id(block) not in self._made:
                raise errors.UnknownHandleError(
                    primitive, f"parameter {param!r}: {block!r} names no block of this schedule's "
                    f"function {block.func_name} and was not made by it (it comes from another "
                    "schedule, or from a copy made later)")
            raise errors.InvalidHandleError(
                primitive, f'block "{block.name}" no longer exists in function {block.func_name} '
                "(an earlier primitive removed or replaced it)", self._func(block.func_name),
                func_name=block.func_name)
        return block.func_name, realize, index

    def _resolve_loop(self, loop, primitive: str, param: str = "loop"):
        """(func_name, For, FuncIndex) for a LoopRV."""
        if not isinstance(loop, LoopRV):
            raise TypeError(f"sch.{primitive}: parameter '{param}' expects a LoopRV (from "
                            f"sch.get_loops or sch.split), got {type(loop).__name__}: {loop!r}")
        self._unknown(loop, primitive, param)
        index = self._index(loop.func_name) if loop.func_name in self._mod else None
        node = None if index is None else index.loops.get(id(loop.var))
        if node is None:
            if id(loop) not in self._made:
                raise errors.UnknownHandleError(
                    primitive, f"parameter {param!r}: {loop!r} names no loop of this schedule's "
                    f"function {loop.func_name} and was not made by it (it comes from another "
                    "schedule, or from a copy made later)")
            raise errors.InvalidHandleError(
                primitive, f"loop {loop.var.name} no longer exists in function {loop.func_name} "
                "(an earlier split/fuse/compute_at replaced it; get fresh handles with sch.get_loops)",
                self._func(loop.func_name), func_name=loop.func_name)
        return loop.func_name, node, index

    def _block_rv(self, realize: S.BlockRealize, func_name: str) -> BlockRV:
        return BlockRV(realize.block.name_hint, func_name)

    def _loop_rv(self, loop: S.For, func_name: str) -> LoopRV:
        return LoopRV(loop.loop_var, func_name)

    def _loop_rv_of_var(self, var, func_name: str) -> LoopRV:
        return LoopRV(var, func_name)

    def get(self, rv):
        """The IR behind a handle, as it is now: the Block of a BlockRV (or block name), the For
        of a LoopRV; a sampled value (already a plain int) is returned as it is."""
        if isinstance(rv, StmtSRef):
            return rv.stmt
        if isinstance(rv, LoopRV):
            return self._resolve_loop(rv, "get", "rv")[1]
        if isinstance(rv, (BlockRV, str)):
            return self._resolve_block(rv, "get", "rv")[1].block
        if isinstance(rv, int):
            if isinstance(rv, SampledInt):
                self._unknown(rv, "get", "rv")
            return rv
        raise TypeError(f"sch.get: expects a BlockRV, a LoopRV or a sampled value, got "
                        f"{type(rv).__name__}: {rv!r}")

    # -- queries (traced, so a trace replays from scratch) ------------------------------------
    @instruction
    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block called ``name`` in function ``func_name`` (default: the only/main function).

        Requires: a block of that name exists ("root" is the function's outermost block).
        Returns: a BlockRV, valid while the block exists.
        Raises: BlockNotFoundError (naming the blocks there are, and the closest match).

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        ...     B = T.alloc_buffer((8,))
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[vi] = A[vi] * T.float32(2)
        ...     for i in range(8):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(8, i)
        ...             C[vi] = B[vi] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> sch.get_block("C")
        BlockRV("C")
        >>> try:
        ...     sch.get_block("BB")
        ... except tir.ScheduleError as err:
        ...     print(str(err).splitlines()[0])
        BlockNotFoundError in sch.get_block: Cannot find a block with the name: BB. There is no block named 'BB' in function main (blocks: B, C); did you mean 'B'?
        """
        if not isinstance(name, str):
            raise TypeError(f"sch.get_block: parameter 'name' expects a str, got {type(name).__name__}")
        func_name = func_name or self._default_func_name()
        if func_name not in self._mod:
            raise errors.BlockNotFoundError(
                "get_block", f"the module has no function {func_name!r}; it has "
                f"{', '.join(gv.name_hint for gv in self._mod.functions)}")
        index = self._index(func_name)
        if name not in index.blocks:
            names = [n for n in index.blocks if n != "root"]
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise errors.BlockNotFoundError(
                "get_block", f"Cannot find a block with the name: {name}. There is no block "
                f"named {name!r} in function {func_name} (blocks: "
                f"{', '.join(names) or 'none'}){hint}", self._func(func_name), func_name=func_name)
        return BlockRV(name, func_name)

    @instruction
    def get_loops(self, block) -> list[LoopRV]:
        """The loops around ``block`` up to its enclosing block, outermost first.

        Returns: a list of LoopRV.
        Raises: InvalidHandleError when the block no longer exists.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        ...     B = T.alloc_buffer((8,))
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[vi] = A[vi] * T.float32(2)
        ...     for i in range(8):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(8, i)
        ...             C[vi] = B[vi] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> sch.get_loops(sch.get_block("C"))
        [LoopRV(i)]
        """
        func_name, realize, index = self._resolve_block(block, "get_loops")
        return [self._loop_rv(loop, func_name) for loop in index.loops_above(realize)]

    @instruction
    def get_child_blocks(self, block_or_loop) -> list[BlockRV]:
        """The blocks directly under a block or loop (not those nested inside those blocks).

        Returns: a list of BlockRV, in program order.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        ...     B = T.alloc_buffer((8,))
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[vi] = A[vi] * T.float32(2)
        ...     for i in range(8):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(8, i)
        ...             C[vi] = B[vi] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> (i,) = sch.get_loops(sch.get_block("B"))
        >>> sch.get_child_blocks(i)
        [BlockRV("B")]
        """
        if isinstance(block_or_loop, LoopRV):
            func_name, node, _ = self._resolve_loop(block_or_loop, "get_child_blocks", "block_or_loop")
        else:
            func_name, node, _ = self._resolve_block(block_or_loop, "get_child_blocks", "block_or_loop")
        return [self._block_rv(b, func_name) for b in child_blocks(node)]

    @instruction
    def get_producers(self, block) -> list[BlockRV]:
        """Blocks in the same scope that write a buffer ``block`` reads.

        Returns: a list of BlockRV.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        ...     B = T.alloc_buffer((8,))
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[vi] = A[vi] * T.float32(2)
        ...     for i in range(8):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(8, i)
        ...             C[vi] = B[vi] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> sch.get_producers(sch.get_block("C"))
        [BlockRV("B")]
        """
        return self._neighbours(block, "get_producers", producers=True)

    @instruction
    def get_consumers(self, block) -> list[BlockRV]:
        """Blocks in the same scope that read a buffer ``block`` writes.

        Returns: a list of BlockRV.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        ...     B = T.alloc_buffer((8,))
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[vi] = A[vi] * T.float32(2)
        ...     for i in range(8):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(8, i)
        ...             C[vi] = B[vi] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> sch.get_consumers(sch.get_block("B"))
        [BlockRV("C")]
        """
        return self._neighbours(block, "get_consumers", producers=False)

    @instruction
    def get_output_blocks(self, scope_block) -> list[BlockRV]:
        """The blocks under ``scope_block`` (at any depth) that write a buffer their own scope
        does not allocate: the blocks whose results leave their scope, in program order.

        Returns: a list of BlockRV.

        Example:

        >>> @T.prim_func
        ... def scale(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        ...     for i, j in T.grid(4, 4):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(3)
        >>> sch = tir.Schedule(scale)
        >>> sch.blockize(sch.get_loops("B")[1])
        BlockRV("B_o")
        >>> sch.get_output_blocks("root"), sch.get_output_blocks("B_o")
        ([BlockRV("B_o"), BlockRV("B")], [BlockRV("B")])
        """
        func_name, realize, _ = self._resolve_block(scope_block, "get_output_blocks", "scope_block")
        found = []

        def visit(scope):
            allocated = {id(b) for b in scope.block.alloc_buffers}
            for child in child_blocks(scope):
                if any(id(w.buffer) not in allocated for w in child.block.writes):
                    found.append(child)
                visit(child)
        visit(realize)
        return [self._block_rv(r, func_name) for r in found]

    def _neighbours(self, block, primitive: str, producers: bool) -> list[BlockRV]:
        func_name, realize, index = self._resolve_block(block, primitive)
        found = index.producers(realize) if producers else index.consumers(realize)
        return [self._block_rv(other, func_name) for other in found]

    # -- seeing the change --------------------------------------------------------------------
    def _record_step(self) -> None:
        self.history.append(Step(None, self._mod, self.trace, len(self.trace.insts)))

    def show_diff(self, step: int = -1) -> None:
        """Show the module before and after a step (default: the last one)."""
        from ...ir.diff import show_diff
        if len(self.history) < 2:
            print("no step has changed the module yet")
            return
        after = self.history[step]
        before = self.history[self.history.index(after) - 1]
        show_diff(before.mod, after.mod, title=after.call)

    def stepper(self, live: bool | None = None):
        """Step through this schedule's trace: each call, the IR after it, the diff from the step
        before and the loop nest of the block it touched; a slider in a notebook, static HTML or
        text elsewhere (see ``mlc_lab.viz.stepper``)."""
        return hooks.need("viz.stepper")(self, live=live)

    # -- numerics guard --------------------------------------------------------------------
    def _check_numerics(self, func_name: str, new_func: PrimFunc, primitive: str) -> None:
        from .numerics import compare_with_reference
        original = self.history[0].mod[func_name]
        problem = compare_with_reference(original, new_func, self._reference_results, func_name)
        if problem:
            raise errors.NumericsChangedError(
                primitive, f"after this step function {func_name} computes different results: "
                f"{problem}", new_func, func_name=func_name)


def _verify_steps(debug_mask) -> bool:
    if debug_mask is None:
        return debug_enabled()
    if debug_mask in ("all", "none"):
        return debug_mask == "all"
    if isinstance(debug_mask, int) and not isinstance(debug_mask, bool):
        return debug_mask != 0
    raise TypeError(f"tir.Schedule: debug_mask expects \"all\", \"none\", an int or None, got {debug_mask!r}")
