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


def test_readme_lists_every_chapter_and_every_chapter_reference_exists():
    root = pathlib.Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    chapters = sorted(p.name for p in (root / "chapters").glob("*.ipynb"))
    assert [n[:2] for n in chapters] == [f"{i:02d}" for i in range(10)], chapters
    for name in chapters:
        assert f"`chapters/{name}`" in readme, f"the README's chapter map misses {name}"
    for image in re.findall(r"!\[[^]]*\]\(([^)]+)\)", readme):
        assert (root / image).is_file(), f"the README shows {image}, which does not exist"
    numbers = {int(n[:2]) for n in chapters}
    for path in (root / "chapters").glob("*.ipynb"):
        for ref in re.findall(r"\b[Cc]hapters? (\d+)\b", path.read_text()):
            assert int(ref) in numbers, f"{path.name} refers to chapter {ref}, which does not exist"
