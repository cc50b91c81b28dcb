"""The measurement worker's main loop (``python -m mlc_lab.meta_schedule.measure_worker R W``):
read jobs from file descriptor R, answer each on W, exit when R closes. Started by
``runner.start_worker``."""
import sys

from mlc_lab.meta_schedule.runner import _Channel, measure


def main(read_fd: int, write_fd: int) -> None:
    channel = _Channel(read_fd, write_fd)
    channel.send("ready")
    while True:
        try:
            job = channel.recv()
        except EOFError:
            return
        channel.send(measure(*job))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
