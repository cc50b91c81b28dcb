"""Data races on shared memory: two threads of a block touch one element between two barriers,
and at least one of them writes it.

Between barriers the threads of a block run in no fixed order, so such a pair gives a result
that depends on timing. The simulator runs threads in lockstep, which would hide the race; this
detector finds it instead. Per shared element and per block it keeps, for the current *epoch*
(the time since the last barrier):

* ``writer``: the thread that wrote the element (-1: none yet), and the statement;
* ``reader``: the thread that read it (-1: none, -2: several threads).

A write races with an earlier write or read by another thread (write after write, write after
read); a read races with an earlier write by another thread (read after write). The order in
which the simulator happens to run the two accesses does not matter: either order is caught.
Two threads writing one element in the same instruction are caught too (write after write).

Most epochs only read a buffer (the compute phase of a tiled matmul), and reads alone cannot
race. So reads are first only noted, cheaply (the cached index array and an offset); they are
checked, element by element, only once a write to the same buffer arrives in the same epoch.
A barrier ends the epoch for the blocks that reach it.
"""
from __future__ import annotations

import numpy as np

from .errors import DataRaceError


class _Epoch:
    def __init__(self, memory):
        self.writer = np.full(memory.flat.size, -1, np.int32)
        self.reader = np.full(memory.flat.size, -1, np.int32)
        self.writer_stmt = np.zeros(memory.flat.size, np.int32)
        self.pending = []      # reads noted before the epoch's first write
        self.live = False      # the arrays above hold this epoch's accesses


class RaceDetector:
    def __init__(self, lanes, kernel_name: str, origin: dict):
        self.lanes, self.kernel_name, self.origin = lanes, kernel_name, origin
        self.epochs: dict = {}
        self.stmts: list = []          # the statements that wrote, numbered for writer_stmt
        self.stmt_numbers: dict = {}

    def epoch(self, memory) -> _Epoch:
        epoch = self.epochs.get(memory)
        if epoch is None:
            epoch = self.epochs[memory] = _Epoch(memory)
        return epoch

    def read(self, memory, position, mask, stmt) -> None:
        epoch = self.epoch(memory)
        if epoch.live:
            self._read(memory, epoch, position, mask, stmt)
        else:
            epoch.pending.append((position, mask, stmt))

    def write(self, memory, position, mask, stmt) -> None:
        epoch = self.epoch(memory)
        self._replay(memory, epoch)
        self._write(memory, epoch, position, mask, stmt)

    def barrier(self, arrived) -> None:
        """End the epoch for the blocks where ``arrived`` holds (None: every block)."""
        for memory, epoch in self.epochs.items():
            if arrived is None:
                epoch.pending.clear()
                if epoch.live:
                    epoch.writer.fill(-1)
                    epoch.reader.fill(-1)
                    epoch.live = False
                continue
            self._replay(memory, epoch)
            rows = epoch.writer.reshape(self.lanes.blocks, -1)
            rows[arrived] = -1
            epoch.reader.reshape(self.lanes.blocks, -1)[arrived] = -1

    def _replay(self, memory, epoch) -> None:
        epoch.live = True
        pending, epoch.pending = epoch.pending, []
        for position, mask, stmt in pending:
            self._read(memory, epoch, position, mask, stmt)

    def _active(self, memory, position, mask):
        position = position[0] + position[1] if isinstance(position, tuple) else position
        address = memory.address(position)
        tid = self.lanes.tid
        shape = np.broadcast_shapes(np.shape(address), tid.shape)
        address, tid = np.broadcast_to(address, shape), np.broadcast_to(tid, shape)
        if mask is True:
            return address.reshape(-1), tid.reshape(-1)
        mask = np.broadcast_to(mask, shape)
        return address[mask], tid[mask]

    def _read(self, memory, epoch, position, mask, stmt) -> None:
        address, tid = self._active(memory, position, mask)
        self._check_writer(memory, epoch, address, tid, stmt, "read after write", "reads")
        reader = epoch.reader[address]
        seen = np.where(reader == -1, tid, np.where(reader == tid, tid, -2))
        epoch.reader[address] = seen
        several = epoch.reader[address] != seen
        epoch.reader[address[several]] = -2

    def _write(self, memory, epoch, position, mask, stmt) -> None:
        address, tid = self._active(memory, position, mask)
        self._check_writer(memory, epoch, address, tid, stmt, "write after write", "writes")
        reader = epoch.reader[address]
        clash = (reader == -2) | ((reader >= 0) & (reader != tid))
        if clash.any():
            at = int(np.argmax(clash))
            other = int(reader[at])
            self._raise(memory, "write after read", address[at], tid[at], other, stmt,
                        "writes", "read", None)
        epoch.writer[address] = tid
        same_time = epoch.writer[address] != tid
        if same_time.any():
            at = int(np.argmax(same_time))
            self._raise(memory, "write after write", address[at], tid[at],
                        epoch.writer[address[at]], stmt, "writes", "writes", stmt)
        number = self.stmt_numbers.setdefault(stmt, len(self.stmts))
        if number == len(self.stmts):
            self.stmts.append(stmt)
        epoch.writer_stmt[address] = number

    def _check_writer(self, memory, epoch, address, tid, stmt, kind, verb) -> None:
        """Raise if a thread other than ``tid`` wrote ``address`` in this epoch."""
        writer = epoch.writer[address]
        clash = (writer >= 0) & (writer != tid)
        if clash.any():
            at = int(np.argmax(clash))
            earlier = self.stmts[epoch.writer_stmt[address[at]]]
            self._raise(memory, kind, address[at], tid[at], writer[at], stmt, verb, "wrote",
                        earlier)

    def _raise(self, memory, kind, address, tid, other, stmt, verb, other_verb, other_stmt):
        slot, index = divmod(int(address), memory.size)
        thread, block = self.lanes.thread_of(int(tid)), self.lanes.block_of(slot)
        other_thread = self.lanes.thread_of(int(other)) if other >= 0 else None
        who = f"thread {other_thread}" if other_thread else "several other threads"
        first = f"{who} {other_verb} it"
        if other_stmt is not None:
            first += " in\n" + _indent(self.origin.get(other_stmt, other_stmt))
        raise DataRaceError(
            f"{self.kernel_name}: data race on shared memory {memory.name}[{index}] in block "
            f"{block} ({kind}):\n{first}\nand thread {thread} {verb} it in\n"
            f"{_indent(self.origin.get(stmt, stmt))}\nwith no barrier between. Threads of a "
            "block run in no fixed order: put T.tvm_storage_sync(\"shared\") (__syncthreads()) "
            "between the two accesses (split_host_device does, unless sync=False)", kind=kind,
            other_thread=other_thread, buffer=memory.name, index=index, thread=thread, block=block)


def _indent(stmt) -> str:
    return "\n".join("    " + line for line in str(stmt).splitlines()[:6])
