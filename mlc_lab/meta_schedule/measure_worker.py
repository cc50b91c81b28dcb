"""The measurement worker's main loop (``python -m mlc_lab.meta_schedule.measure_worker R W``):
read messages from file descriptor R, answer each on W, exit when R closes. Started by
``runner.start_worker``. A ("reference", key, workload) message computes and keeps the workload's
expected outputs, answering None or the error; ("forget", key) drops them, unanswered; a
("measure", key, job) message measures a candidate of the workload named by key, answering a
RunResult."""
import sys
import traceback

from mlc_lab.meta_schedule.runner import Reference, _Channel, measure


def main(read_fd: int, write_fd: int) -> None:
    channel = _Channel(read_fd, write_fd)
    channel.send("ready")
    references = {}
    while True:
        try:
            message = channel.recv()
        except EOFError:
            return
        if message[0] == "reference":
            _, key, workload = message
            try:
                references[key] = Reference.of(workload.mod, workload.func_name,
                                                        workload.seed)
                channel.send(None)
            except Exception as err:
                channel.send("".join(traceback.format_exception_only(type(err), err)).strip())
        elif message[0] == "forget":
            references.pop(message[1], None)
        else:
            _, key, job = message
            channel.send(measure(references[key], *job))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
