"""mlc_lab's homework autograder: the ``mlc-lab`` command (assign, grade, gradescope), the
``submission`` a test cell reads the student's work through, and the ``checks`` it decides with.

    from autograder import checks, submission     # in a homework notebook

See ``autograder/README.md`` for the notebook format, the trust model and the commands.
"""
from . import checks
from .submission import submission

__all__ = ["checks", "submission"]
