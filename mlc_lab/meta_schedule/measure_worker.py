"""The measurement worker's main loop (``python -m mlc_lab.meta_schedule.measure_worker R W``):
read messages from file descriptor R, answer each on W, exit when R closes. Started by
``runner.start_worker``. A ("reference", key, workload, cache_dir) message computes (or finds in
the cache directory, None for none) and keeps the workload's expected outputs, answering None
or the error; ("forget", key) drops them and the programs built for the workload, unanswered;
a ("measure", key, job) message measures a candidate of the workload named by key, answering a
RunResult."""
import sys
import traceback

from mlc_lab.meta_schedule.measure_cache import BuildCache, reference_of
from mlc_lab.meta_schedule.runner import _Channel, measure


NO_ANSWER = object()


class WorkerState:
    """What a worker keeps: expected outputs by workload key, and built programs."""

    def __init__(self):
        self.references: dict = {}
        self.builds = BuildCache()


def answer(message, state: WorkerState):
    """The answer to one message (NO_ANSWER for "forget")."""
    if message[0] == "reference":
        _, key, workload, cache_dir = message
        try:
            state.references[key] = reference_of(workload.mod, workload.func_name, workload.seed,
                                                  cache_dir)
            return None
        except Exception as err:
            return "".join(traceback.format_exception_only(type(err), err)).strip()
    if message[0] == "forget":
        state.references.pop(message[1], None)
        state.builds.forget(message[1])
        return NO_ANSWER
    _, key, job = message
    return measure(state.references[key], *job, builds=(state.builds, key))


def main(read_fd: int, write_fd: int) -> None:
    channel = _Channel(read_fd, write_fd)
    channel.send("ready")
    state = WorkerState()
    while True:
        try:
            message = channel.recv()
        except EOFError:
            return
        reply = answer(message, state)
        if reply is not NO_ANSWER:
            channel.send(reply)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
