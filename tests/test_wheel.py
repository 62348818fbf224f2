"""The pip path: the project builds as a wheel, the wheel installs into a fresh virtual environment,
and the README's quickstart, copied out of the clone, runs there offline with the core alone.

The fresh venv gets the core's dependencies, and only those, from this environment: the closure
of ``pyproject.toml``'s ``dependencies`` (what they require in turn, extras and markers evaluated
as pip would) is linked into one directory that a ``.pth`` file puts on the fresh venv's path, so
no package is downloaded or copied (torch alone is ~700 MB) and nothing of an extra is there.
Then ``pip install --no-deps`` installs the wheel, ``pip check`` confirms the core's requirements
are met, and the quickstart runs: the entry points (the memory toolkit, the compaction plugins,
the backend schemes) come from the wheel's own metadata."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _closure(requirements: list[str]) -> set[str]:
    """Names of the installed distributions ``requirements`` need, transitively (each distribution
    with each extra asked of it expanded once)."""
    names: set[str] = set()
    expanded: set[tuple[str, str]] = set()
    todo = [(Requirement(text), "") for text in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({**default_environment(), "extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        names.add(name)
        for wanted in ("", *sorted(requirement.extras)):
            if (name, wanted) not in expanded:
                expanded.add((name, wanted))
                requires = importlib.metadata.distribution(requirement.name).requires or []
                todo.extend((Requirement(text), wanted) for text in requires)
    return names


def _link_distributions(names: set[str], target: Path) -> None:
    target.mkdir()
    for name in names:
        dist = importlib.metadata.distribution(name)
        for top in {Path(str(file)).parts[0] for file in dist.files or [] if not str(file).startswith("..")}:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (target / top).exists():
                (target / top).symlink_to(source)


def test_the_wheel_installs_in_a_fresh_venv_and_runs_the_quickstart(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("agent_memory-*.whl")

    core = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    names = _closure(core)
    assert "typer" not in names or "chromadb" in names  # typer only as chromadb's own requirement
    assert not names & {"mcp", "anthropic", "matplotlib", "psycopg", "openai-agents", "langchain"}  # jinja2: torch needs it
    _link_distributions(names, tmp_path / "deps")
    fresh = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)  # this environment's pip serves it (--python): nothing bundled
    python = fresh / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "core-dependencies.pth").write_text(str(tmp_path / "deps") + "\n", encoding="utf-8")

    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python)]
    installed = subprocess.run([*pip, "install", "--no-index", "--no-deps", str(wheel)], capture_output=True,
                               text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout[-3000:]

    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "AGENT_MEMORY_URL", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("AGENT_MEMORY_DATA", None)
    work = tmp_path / "work"
    work.mkdir()
    quickstart = work / "quickstart.py"  # copied out of the clone: it reads only what the wheel ships
    quickstart.write_text((ROOT / "examples" / "quickstart.py").read_text(encoding="utf-8"), encoding="utf-8")
    ran = subprocess.run([str(python), str(quickstart)], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.splitlines()[-1] == "The Fetch API replaces XMLHttpRequest. [('fetch_page',), ()]"
    where = subprocess.run([str(python), "-c", "import agent_memory, importlib.util as u; print(agent_memory.__file__); "
                            "print(u.find_spec('mcp'), u.find_spec('matplotlib'))"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120)
    located, extras = where.stdout.splitlines()
    assert located.startswith(str(site)) and extras == "None None"  # the wheel's copy; no extra's module
