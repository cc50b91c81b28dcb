"""``contrib.utils.tempdir()``: a temporary directory for generated files."""
from __future__ import annotations

import os
import shutil
import tempfile


class TempDirectory:
    """A directory removed when the object is garbage-collected (or by ``remove()``)."""

    def __init__(self, custom_path: str | None = None):
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
        self.temp_dir = custom_path or tempfile.mkdtemp(prefix="mlc_lab_")
        self._owned = custom_path is None

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        if self._owned and os.path.isdir(self.temp_dir):
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __del__(self):
        self.remove()


def tempdir(custom_path: str | None = None) -> TempDirectory:
    return TempDirectory(custom_path)


__all__ = ["TempDirectory", "tempdir"]
