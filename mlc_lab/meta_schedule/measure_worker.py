"""The measurement worker's main loop (``python -m mlc_lab.meta_schedule.measure_worker R W``):
read messages from file descriptor R, answer each on W, exit when R closes. Started by
``runner.start_worker``. A ("reference", key, workload) message computes and keeps the workload's
expected outputs, answering None or the error; ("forget", key) drops them, unanswered; a
("measure", key, job) message measures a candidate of the workload named by key, answering a
RunResult."""
import sys
import traceback

from mlc_lab.meta_schedule.runner import Reference, _Channel, measure


NO_ANSWER = object()


def answer(message, references: dict):
    """The answer to one message (NO_ANSWER for "forget"); ``references`` is the worker's state."""
    if message[0] == "reference":
        _, key, workload = message
        try:
            references[key] = Reference.of(workload.mod, workload.func_name, workload.seed)
            return None
        except Exception as err:
            return "".join(traceback.format_exception_only(type(err), err)).strip()
    if message[0] == "forget":
        references.pop(message[1], None)
        return NO_ANSWER
    _, key, job = message
    return measure(references[key], *job)


def main(read_fd: int, write_fd: int) -> None:
    channel = _Channel(read_fd, write_fd)
    channel.send("ready")
    references = {}
    while True:
        try:
            message = channel.recv()
        except EOFError:
            return
        reply = answer(message, references)
        if reply is not NO_ANSWER:
            channel.send(reply)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
