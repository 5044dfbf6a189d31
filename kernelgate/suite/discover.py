"""Which problems a suite runs: KernelBench-format files under a directory (levels as subfolders), then
--only, --sample and --shard, each deterministic (the same arguments pick the same problems in the same
order on every machine)."""
from __future__ import annotations

import fnmatch
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import KernelgateError
from ..records import Reason

#: files that are a problem: they define the reference class and its input generator
_MODEL = re.compile(r"^class\s+Model\b", re.MULTILINE)
_INPUTS = re.compile(r"^def\s+get_inputs\b", re.MULTILINE)
ROOT_LEVEL = "."                         # problems directly in DIR, not in a level subfolder
#: a directory holding one of these is outputs, not problems (a suite's out dir, an optimize's --out)
OUTPUT_MARKERS = ("suite.json", "run.json", "result.json", "status.json")


@dataclass(frozen=True)
class Problem:
    """One KernelBench-format file: its level (the subfolder, '.' at the top) and name (the file's stem)."""

    level: str
    name: str
    path: str

    @property
    def id(self) -> str:
        return self.name if self.level == ROOT_LEVEL else f"{self.level}/{self.name}"

    def out_dir(self, out: Path) -> Path:
        """Where its optimize outputs and status file go: OUT/<level>/<name>/ (OUT/<name>/ at the top)."""
        return out / self.name if self.level == ROOT_LEVEL else out / self.level / self.name


def natural_key(text: str) -> list:
    """'level2/10_x' after 'level2/9_x' (KernelBench numbers its files)."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", text)]


def _is_problem(path: Path) -> bool:
    if path.name.startswith(("_", ".")) or path.suffix != ".py":
        return False
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return bool(_MODEL.search(text) and _INPUTS.search(text))


def discover(root: str | Path) -> list[Problem]:
    """Every problem file in DIR (level '.') and in its subfolders (level = the subfolder's path relative to
    DIR), in natural order of level then name. Files without `class Model` and `def get_inputs` are not
    problems (helpers, __init__.py); folders holding a suite's or an optimize's outputs, and hidden or
    underscored folders, are not searched. A missing or empty DIR is a usage error."""
    base = Path(root)
    if not base.is_dir():
        raise KernelgateError(f"suite: {root} is not a directory", Reason.USAGE)
    found = []
    for d, dirs, files in os.walk(base):
        here = Path(d)
        if here != base and (any(m in files for m in OUTPUT_MARKERS) or here.name.startswith((".", "_"))):
            dirs.clear()                  # a suite's or an optimize's outputs (reference.py ...), or hidden
            continue
        dirs.sort()
        for f in files:
            p = here / f
            if not _is_problem(p):
                continue
            rel = p.relative_to(base)
            level = ROOT_LEVEL if len(rel.parts) == 1 else "/".join(rel.parts[:-1])
            found.append(Problem(level, p.stem, str(p.resolve())))
    if not found:
        raise KernelgateError(f"suite: no KernelBench-format problems (class Model, get_inputs) under {root}",
                              Reason.USAGE)
    return sorted(found, key=lambda q: (natural_key(q.level), natural_key(q.name)))


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'I/N' with 1 <= I <= N -> (I, N); anything else is a usage error."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise KernelgateError(f"--shard takes I/N with 1 <= I <= N (e.g. 1/4), got '{text}'", Reason.USAGE)
    return int(m.group(1)), int(m.group(2))


def matches(problem: Problem, patterns: str) -> bool:
    """--only: comma-separated globs, each tried on the id ('level1/19_ReLU'), the name and the file name."""
    names = (problem.id, problem.name, Path(problem.path).name)
    return any(fnmatch.fnmatchcase(n, g.strip()) for g in patterns.split(",") if g.strip() for n in names)


def select(problems: list[Problem], only: str | None = None, sample: int | None = None, seed: int = 0,
           shard: str | tuple[int, int] | None = None) -> list[Problem]:
    """--only, then --sample N (a seeded draw, kept in natural order), then --shard I/N (every N-th problem of
    what is left, starting at the I-th: each level spread evenly over the shards). The shards of one selection
    partition it. Nothing left is a usage error."""
    picked = [p for p in problems if matches(p, only)] if only else list(problems)
    if only and not picked:
        raise KernelgateError(f"--only '{only}' matched none of the {len(problems)} problems", Reason.USAGE)
    if sample is not None:
        if sample < 1:
            raise KernelgateError(f"--sample must be at least 1, got {sample}", Reason.USAGE)
        if sample < len(picked):
            keep = set(random.Random(seed).sample(range(len(picked)), sample))
            picked = [p for i, p in enumerate(picked) if i in keep]
    sh = parse_shard(shard) if isinstance(shard, str) or shard is None else shard
    if sh is not None:
        i, n = sh
        picked = picked[i - 1::n]
        if not picked:
            raise KernelgateError(f"--shard {i}/{n} holds no problem (the selection has fewer than {i})",
                                  Reason.USAGE)
    return picked
