"""``TVMError``: the common base of the errors mlc_lab raises where the reference compiler raises
its ``TVMError`` (schedule errors, IR verification errors), so that code catching that name, as
tests written for the reference compiler do, catches them here too."""


class TVMError(Exception):
    """Base class of mlc_lab's compiler errors that the reference compiler reports as
    ``TVMError``: ``tir.ScheduleError`` (a primitive refused a schedule) and ``tir.VerifyError``
    (a PrimFunc breaks a well-formedness rule). Catch a subclass where you can: its message and
    attributes say which rule was broken."""


__all__ = ["TVMError"]
