"""Which problems a suite picks: levels as subfolders, natural order, --only, --sample, --shard; usage errors."""
import pytest

from kernelgate import cli
from kernelgate.errors import KernelgateError
from kernelgate.suite.discover import discover, parse_shard, select


@pytest.fixture
def tree(problems, tmp_path):
    root = problems({"level1/1_Relu": "", "level1/2_Gelu": "", "level1/10_Softmax": "", "level2/3_Conv": "",
                     "level2/sub/4_Deep": "", "top": ""})
    (root / "level1" / "helper.py").write_text("def f():\n    return 1\n")          # no class Model: not a problem
    (root / "level1" / "__init__.py").write_text("")
    (root / "_private").mkdir()
    (root / "_private" / "x.py").write_text((root / "top.py").read_text())
    for out in ("old_results", "opt_out/sub"):        # earlier outputs inside DIR: their reference.py is no problem
        d = root / out / "level1" / "1_Relu"
        d.mkdir(parents=True)
        (d / "reference.py").write_text((root / "top.py").read_text())
    (root / "old_results" / "suite.json").write_text("{}")
    (root / "opt_out" / "sub" / "level1" / "1_Relu" / "run.json").write_text("{}")
    (root / "opt_out" / "sub" / "level1" / "1_Relu" / "result.json").write_text("{}")
    return root


def ids(ps):
    return [p.id for p in ps]


def test_discovers_levels_in_natural_order(tree):
    ps = discover(tree)
    assert ids(ps) == ["top", "level1/1_Relu", "level1/2_Gelu", "level1/10_Softmax", "level2/3_Conv",
                       "level2/sub/4_Deep"]
    assert ps[1].level == "level1" and ps[1].name == "1_Relu" and ps[1].path.endswith("level1/1_Relu.py")
    assert ps[0].out_dir(tree / "o") == tree / "o" / "top"
    assert ps[5].out_dir(tree / "o") == tree / "o" / "level2" / "sub" / "4_Deep"


def test_only_globs(tree):
    ps = discover(tree)
    assert ids(select(ps, only="level1/*")) == ["level1/1_Relu", "level1/2_Gelu", "level1/10_Softmax"]
    assert ids(select(ps, only="*Gelu,3_*")) == ["level1/2_Gelu", "level2/3_Conv"]
    assert ids(select(ps, only="10_Softmax.py")) == ["level1/10_Softmax"]
    with pytest.raises(KernelgateError, match="matched none"):
        select(ps, only="level9/*")


def test_sample_is_seeded_and_kept_in_order(tree):
    ps = discover(tree)
    a, b = select(ps, sample=3, seed=7), select(ps, sample=3, seed=7)
    assert ids(a) == ids(b) and len(a) == 3
    assert ids(a) == [p.id for p in ps if p in a]                    # natural order kept
    draws = {tuple(ids(select(ps, sample=3, seed=s))) for s in range(10)}
    assert len(draws) > 1                                            # the seed matters
    assert ids(select(ps, sample=100)) == ids(ps)
    with pytest.raises(KernelgateError):
        select(ps, sample=0)


def test_shards_partition_the_selection(tree):
    ps = discover(tree)
    for n in (1, 2, 4):
        shards = [ids(select(ps, sample=5, seed=3, shard=f"{i}/{n}")) for i in range(1, n + 1)]
        flat = [x for s in shards for x in s]
        assert sorted(flat) == sorted(ids(select(ps, sample=5, seed=3))) and len(flat) == len(set(flat))
    assert ids(select(ps, shard="2/3")) == ids(select(ps, shard="2/3"))
    for bad in ("0/2", "3/2", "a/b", "1", "1/0"):
        with pytest.raises(KernelgateError, match="--shard"):
            parse_shard(bad)
    with pytest.raises(KernelgateError, match="holds no problem"):
        select(ps[:2], shard="3/3")


def test_usage_errors_exit_2(tree, tmp_path, capsys):
    out = str(tmp_path / "o")
    assert cli.main(["suite", str(tmp_path / "missing"), "--out", out]) == 2
    assert cli.main(["suite", str(tree), "--only", "nothing*", "--out", out]) == 2
    assert cli.main(["suite", str(tree), "--shard", "5/4", "--out", out]) == 2
    (tmp_path / "empty").mkdir()
    assert cli.main(["suite", str(tmp_path / "empty"), "--out", out]) == 2
    assert cli.main(["suite", str(tree), "--max-candidates", "0", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err and "matched none" in err and "--shard takes I/N" in err
    assert "no KernelBench-format problems" in err
