"""The README's tour is code a newcomer pastes first: it must run as written."""
import pathlib
import re


def test_readme_tour_runs(tmp_path, monkeypatch, capsys):
    readme = pathlib.Path(__file__).resolve().parent.parent / "README.md"
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    assert blocks, "README.md has no python code block"
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "tour.py"
    source.write_text("\n".join(blocks))
    namespace = {"__name__": "__tour__", "__file__": str(source)}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    assert "sch.reverse_compute_at" in capsys.readouterr().out
