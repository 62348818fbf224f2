"""The light core: ``pip install agent-memory`` (no extra) stores, cites, retrieves, queries and
runs a MemoryAgent turn; every optional part names its extra when that extra is missing.

A child process hides every extra's modules (an import hook that finds none of them, as in an
environment where they were never installed) and runs the README's quickstart
(``examples/quickstart.py``) there, offline, on a real page. The extras' map
(``agent_memory.extras.EXTRAS``) is checked against ``pyproject.toml`` and the installed
distributions, so a module added to an extra without its distribution (or the reverse) fails here.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from agent_memory.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.py"
HIDDEN = sorted({module for modules in EXTRAS.values() for module in modules})

HIDE = textwrap.dedent("""
    import importlib.abc, sys
    HIDDEN = set({hidden!r})

    class Hidden(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Hidden())
    import importlib.util
    _find = importlib.util.find_spec
    importlib.util.find_spec = lambda name, package=None: None if name.split(".")[0] in HIDDEN else _find(name, package)
""")


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("AGENT_MEMORY_URL", None)
    return subprocess.run([sys.executable, "-c", HIDE.format(hidden=HIDDEN) + code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _pyproject_extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def _distributions(requirements: list[str], extras: dict[str, list[str]]) -> set[str]:
    """Distribution names of an extra's requirements, ``agent-memory[...]`` expanded."""
    names: set[str] = set()
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "agent-memory":
            for inner in requirement.extras:
                names |= _distributions(extras[inner], extras)
        else:
            names.add(name)
    return names


def test_the_core_has_at_most_14_requirements_and_none_of_an_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = _distributions(project["dependencies"], {})
    # 13 since the library runs the embedding model with onnxruntime itself (chromadb required it
    # already, so it installs nothing new; `onnx` writes the model's export, once per machine);
    # 14 with orjson (indented JSON; chromadb requires it too: nothing new is installed); 15 with
    # lxml_html_clean (trafilatura asks for it as lxml's html_clean extra, which the pip of Python
    # 3.11, 23.2, does not install: named here, it is installed by every pip; nothing new otherwise).
    assert len(core) <= 15, sorted(core)
    extras = _pyproject_extras()
    for extra in EXTRAS:
        assert not core & _distributions(extras[extra], extras), extra


def test_the_extras_map_matches_pyproject_and_what_each_distribution_provides() -> None:
    extras = _pyproject_extras()
    provided = importlib.metadata.packages_distributions()  # top-level module -> distributions
    for extra, modules in EXTRAS.items():
        assert extra in extras, f"{extra} is not an extra of pyproject.toml"
        wanted = _distributions(extras[extra], extras)
        for module in modules:
            owners = {canonicalize_name(name) for name in provided.get(module, [])}
            assert owners & wanted, f"{module} ({extra}) comes from {owners}, not from {sorted(wanted)}"
    everything = set().union(*(_distributions(extras[extra], extras) for extra in EXTRAS))
    assert _distributions(extras["all"], extras) == everything


def test_the_quickstart_runs_with_no_extra_installed(tmp_path: Path) -> None:
    code = f"""
import runpy
runpy.run_path({str(QUICKSTART)!r}, run_name="__main__")
for name in {HIDDEN!r}:
    assert name not in sys.modules, name
"""
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("[https://example.org/fetch-api · ") and 'retrieve_memory(id="mem_' in lines[0]
    assert any("XMLHttpRequest" in line for line in lines[1:-2])
    assert lines[-1] == "The Fetch API replaces XMLHttpRequest. [('fetch_page',), ()]"
    assert (tmp_path / "quickstart-memory" / "agents" / "quickstart").is_dir()


@pytest.mark.parametrize(("extra", "statement"), [
    ("cli", "import agent_memory.cli"),
    ("replay", "from agent_memory.replay.report_plots import write_report; write_report(None, 'out')"),
    ("mcp", "import agent_memory.mcp_server"),
    ("anthropic", "import agent_memory.integrations.anthropic_memory"),
    ("anthropic", "from agent_memory import AnthropicChatModel; AnthropicChatModel('claude-sonnet-4-6', api_key='x')"),
    ("langchain", "import agent_memory.integrations.langchain"),
    ("langchain", "import agent_memory.integrations.langgraph_store"),
    ("openai-agents", "import agent_memory.integrations.openai_agents"),
    ("pydantic-ai", "import agent_memory.integrations.pydantic_ai"),
    ("postgres", "from agent_memory import AgentMemory; AgentMemory('a', backend='postgresql://u@localhost/db')"),
    ("inspector", "from agent_memory.inspector import Inspector; Inspector(sys.argv[0]).app()"),
])
def test_an_optional_part_without_its_extra_says_which_to_install(extra: str, statement: str, tmp_path: Path) -> None:
    code = f"""
from agent_memory.errors import MissingExtraError
try:
    {statement}
except MissingExtraError as exc:
    print(json.dumps([str(exc), isinstance(exc, ImportError)]))
else:
    raise SystemExit("no MissingExtraError")
"""
    done = _run("import json\n" + code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    message, is_import_error = json.loads(done.stdout.splitlines()[-1])
    assert f"pip install 'agent-memory[{extra}]'" in message and is_import_error


def test_the_command_line_helps_with_the_cli_extra_alone(tmp_path: Path) -> None:
    # the replay's plots need the replay extra (matplotlib): the command line and its help do not
    hidden = sorted(set(HIDDEN) - set(EXTRAS["cli"]))
    code = textwrap.dedent("""
        from typer.testing import CliRunner
        from agent_memory.cli import app
        open("note.txt", "w").write("The lighthouse keeper logs the weather at dawn.")
        for args in (["--help"], ["replay", "--help"], ["replay", "."],
                     ["store", "note.txt", "--memory-dir", "mem", "--no-index", "-q"]):
            done = CliRunner().invoke(app, args)
            print(json.dumps([args, done.exit_code, done.output]))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", HIDE.format(hidden=hidden) + "import json\n" + code], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    (_, main_code, main_help), (_, replay_code, replay_help), (_, run_code, run_output), (_, store_code, stored) = runs
    assert store_code == 0 and stored.strip().startswith("mem_"), stored
    assert main_code == 0 and "replay" in main_help and "store" in main_help
    assert replay_code == 0 and "--out" in replay_help
    assert run_code == 1 and "pip install 'agent-memory[replay]'" in run_output
