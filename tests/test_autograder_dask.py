"""``mlc-lab grade --dask ADDRESS``: the same jobs on a Dask cluster (a local one, started here),
one task per submission, the coordinator writing every file."""
import json

import pytest

import autograder_homework as hw
from autograder.batch import grade_many


def test_grading_on_a_dask_cluster_matches_the_expected_scores(tmp_path):
    distributed = pytest.importorskip("distributed")
    source = tmp_path / "instructor" / "homework.ipynb"
    source.parent.mkdir()
    hw.write(hw.source(), source)
    subs = {"perfect": hw.student(), "blank": hw.student(blank=("t1", "t2", "t3", "t4", "t5")),
            "half": hw.student({"double": "def double(x):\n    return x"}, blank=("t4",))}
    paths = []
    for name, nb in subs.items():
        paths.append(tmp_path / f"{name}.ipynb")
        hw.write(nb, paths[-1])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        done = grade_many(source, paths, tmp_path / "out", dask_address=cluster.scheduler_address,
                          progress_bar=False)
    assert sorted(r["name"] for r in done) == ["blank", "half", "perfect"]
    scores = {name: json.loads((tmp_path / "out" / name / "results.json").read_text())["score"] for name in subs}
    assert scores == {"perfect": hw.MAX_SCORE, "blank": 0, "half": hw.MAX_SCORE - 2}
    assert (tmp_path / "out" / "grades.csv").read_text().count("\n") == 4
