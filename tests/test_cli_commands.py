"""The commands issue #20 (finding 11) found missing: ``get``, ``forget``, ``pin`` / ``unpin``,
``stats``, ``export`` / ``import``, and one spelling of the memory options (``--agent-id``,
``--memory-dir``) on every command. Run in-process with typer's CliRunner on real components: a
real memory directory, the real embedding model and index, a real page of ../shared/data."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer.core
import typer.main
from click.testing import Result
from typer.testing import CliRunner

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.cli import app
from agent_memory.kernel.manager import MemoryManager

PAGE = "webpages/readability/lemonde-1/source.html"  # 87 KB, 611 characters that are not ASCII
LIBRARY = MemoryConfig(index_on_store=False)
MEMORY_COMMANDS = ["store", "retrieve", "query", "list", "get", "forget", "pin", "unpin", "stats", "export",
                   "import", "rebuild-index", "serve-mcp"]
"""Every command that opens a memory."""


def run(*args: str, input: bytes | str | None = None, code: int = 0) -> Result:  # noqa: A002
    result = CliRunner().invoke(app, list(args), input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result


@pytest.fixture
def mem(tmp_path: Path) -> list[str]:
    """``--memory-dir <tmp>``, to put before or after a command."""
    return ["--memory-dir", str(tmp_path / "memory")]


def store(mem: list[str], *args: str, input: bytes | str | None = None) -> str:  # noqa: A002
    (item_id,) = run("store", *args, "--no-index", "-q", *mem, input=input).stdout.split()
    return item_id


def kernel(memory_dir: Path, agent_id: str = "default") -> MemoryManager:
    """The agent's conversation kernel as a MemoryManager opened now finds it on disk."""
    return MemoryManager(AgentMemory(agent_id, memory_dir, config=LIBRARY))


# -- get -------------------------------------------------------------------------------------------
@pytest.mark.data
def test_get_writes_the_content_exactly_as_stored(mem: list[str], tmp_path: Path, data_dir: Path) -> None:
    page = data_dir / PAGE
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 3)
    note = tmp_path / "note.txt"
    note.write_text("no newline at the end", encoding="utf-8")
    ids = {name: store(mem, str(path)) for name, path in (("page", page), ("blob", blob), ("note", note))}
    ids["json"] = store(mem, "-", input='{"zeta": 1, "alpha": [1, 2]}')

    assert run("get", ids["page"], *mem).stdout_bytes == page.read_bytes()
    assert run("get", ids["blob"], *mem).stdout_bytes == blob.read_bytes()
    assert run("get", ids["note"], *mem).stdout_bytes == b"no newline at the end"
    assert json.loads(run("get", ids["json"], *mem).stdout_bytes) == {"zeta": 1, "alpha": [1, 2]}

    record = json.loads(run("get", ids["page"], "--json", *mem).stdout)
    assert record["id"] == ids["page"] and record["type"] == "web_content" and "content" not in record
    assert record["metadata"]["size_bytes"] == page.stat().st_size
    assert "no memory item 'mem_000000000000'" in run("get", "mem_000000000000", *mem, code=1).stderr
    assert "invalid memory id" in run("get", "nope", *mem, code=1).stderr


# -- forget, pin, unpin ----------------------------------------------------------------------------
def test_pin_and_unpin_go_through_the_kernel(mem: list[str], tmp_path: Path) -> None:
    memory_dir = tmp_path / "memory"
    first = store(mem, "-", input="The client's budget is 40,000 EUR.")
    second = store(mem, "-", input="Answer the client in French.")

    assert run("pin", first, second, *mem).stdout.splitlines() == [f"Pinned {first}.", f"Pinned {second}."]
    assert kernel(memory_dir).pinned_items == (first, second)  # what compactions and pin_memory see
    assert run("pin", *mem).stdout.split() == [first, second]
    assert json.loads(run("pin", "--json", *mem).stdout) == [first, second]

    assert run("unpin", first, *mem).stdout.strip() == f"Unpinned {first}."
    assert kernel(memory_dir).pinned_items == (second,)
    assert "not pinned: " + first in run("unpin", first, *mem, code=1).stderr
    refused = run("pin", first, "mem_000000000000", *mem, code=1)  # one unknown id: nothing is pinned
    assert "no memory item 'mem_000000000000'" in refused.stderr
    assert kernel(memory_dir).pinned_items == (second,)


def test_forget_goes_through_the_kernel(mem: list[str], tmp_path: Path) -> None:
    memory_dir = tmp_path / "memory"
    secret = store(mem, "-", input="The API key is sk-live-0000.")
    kept = store(mem, "-", input="The meeting moved to Tuesday.")
    run("pin", secret, kept, *mem)

    refused = run("forget", secret, "mem_000000000000", *mem, code=1)  # one unknown id: nothing is deleted
    assert "nothing was changed" in refused.stderr
    assert secret in AgentMemory("default", memory_dir, config=LIBRARY)

    assert run("forget", secret, *mem).stdout.strip() == f"Forgot {secret}."
    memory = AgentMemory("default", memory_dir, config=LIBRARY)
    assert secret not in memory and kept in memory
    assert kernel(memory_dir).pinned_items == (kept,)  # the kernel forgot it too, as forget_memory does
    assert run("forget", secret, *mem, code=1).exit_code == 1


# -- stats -----------------------------------------------------------------------------------------
def test_stats(mem: list[str], tmp_path: Path) -> None:
    empty = json.loads(run("stats", "--json", *mem).stdout)
    assert empty["items"] == 0 and empty["pending_index"] == 0 and empty["by_type"] == {}
    assert empty["backend"] == AgentMemory("default", tmp_path / "memory", config=LIBRARY).backend.url

    notes = [store(mem, "-", "--tag", "alpha", input=f"Note {n}: the tide is high at {n}:00.") for n in range(2)]
    rows = store(mem, "-", "--type", "database_result", input='[{"id": 1, "name": "Ada"}]')
    run("pin", rows, *mem)
    records = {record.id: record for record in AgentMemory("default", tmp_path / "memory", config=LIBRARY).records()}

    data = json.loads(run("stats", "--json", *mem).stdout)
    assert data["items"] == 3 and data["pending_index"] == 3  # stored with --no-index
    assert data["size_bytes"] == sum(record.metadata.size_bytes for record in records.values())
    assert data["tokens"] == sum(record.metadata.tokens for record in records.values())
    assert data["by_type"]["custom"] == {
        "items": 2,
        "size_bytes": sum(records[item_id].metadata.size_bytes for item_id in notes),
        "tokens": sum(records[item_id].metadata.tokens for item_id in notes),
        "uncounted": 0,  # small results are counted when stored
    }
    assert data["by_type"]["database_result"]["items"] == 1
    assert data["pinned_items"] == [rows] and data["top_tags"] == {"alpha": 2}
    assert data["disk_bytes"] > data["size_bytes"]

    run("query", "when is the tide high", *mem)  # indexes what is pending
    after = json.loads(run("stats", "--json", *mem).stdout)
    assert after["pending_index"] == 0
    table = run("stats", *mem).stdout
    assert "database_result" in table and "not yet indexed: 0" in table and rows in table


# -- export and import -----------------------------------------------------------------------------
def test_export_then_import_restores_every_item(mem: list[str], tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    ids = [
        store(mem, "-", "--tag", "ops", "--title", "Runbook", input="Restart the queue worker first.\n"),
        store(mem, str(blob)),
        store(mem, "-", input='{"zeta": 1, "alpha": {"b": 2, "a": 1}}'),
    ]
    out = tmp_path / "export.jsonl"
    run("export", str(out), *mem)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == ids  # oldest first, one item a line
    assert run("export", *mem).stdout == out.read_text(encoding="utf-8")  # no FILE: stdout

    said = run("import", str(out), "--agent-id", "copy", *mem).stdout
    assert "Imported 3 item(s)" in said
    original = AgentMemory("default", tmp_path / "memory", config=LIBRARY)
    copy = AgentMemory("copy", tmp_path / "memory", config=LIBRARY)
    assert copy.records() == original.records()  # ids, types, metadata, timestamps
    for item_id in ids:
        assert copy.get(item_id).content == original.get(item_id).content
        assert run("get", item_id, "--agent-id", "copy", *mem).stdout_bytes == run("get", item_id, *mem).stdout_bytes
    assert [hit["item"]["id"] for hit in json.loads(
        run("query", "what to restart first", "--agent-id", "copy", "--limit", "1", "--json", *mem).stdout)] == [ids[0]]

    clash = run("import", str(out), "--agent-id", "copy", *mem, code=1)  # the ids are there: nothing changes
    assert "nothing was imported" in clash.stderr and len(copy.records()) == 3

    extra = store(["--agent-id", "copy", *mem], "-", input="Only in the copy.")
    partial = tmp_path / "partial.jsonl"
    partial.write_text(lines[0] + "\n", encoding="utf-8")
    run("import", str(partial), "--replace", "--agent-id", "copy", *mem)
    assert [record.id for record in copy.records()] == [ids[0]] and extra not in copy

    run("import", str(out), "--agent-id", "merged", *mem)
    merged_extra = store(["--agent-id", "other", *mem], "-", input="A note of another agent.")
    snapshot = AgentMemory("other", tmp_path / "memory", config=LIBRARY).snapshot().save(tmp_path / "snap.json")
    run("import", str(snapshot), "--agent-id", "merged", *mem)  # a MemorySnapshot.save file, added beside
    merged = AgentMemory("merged", tmp_path / "memory", config=LIBRARY)
    assert [record.id for record in merged.records()] == [*ids, merged_extra]

    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + "\n" + '{"id": "mem_0123456789ab", "content": 1, "metadata": {"tokens": -1}}\n',
                      encoding="utf-8")
    bad = run("import", str(broken), "--agent-id", "fresh", *mem, code=1)
    assert f"{broken}:2: not an exported item" in bad.stderr
    assert not AgentMemory("fresh", tmp_path / "memory", config=LIBRARY).records()


# -- one spelling ----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", MEMORY_COMMANDS)
def test_every_command_takes_agent_id_and_memory_dir(command: str) -> None:
    shown = run(command, "--help").stdout
    assert "--agent-id" in shown and "--memory-dir" in shown
    assert "--agent " not in shown and "--agent\n" not in shown  # the old spelling is hidden


def test_the_memory_options_work_before_and_after_the_command(mem: list[str], tmp_path: Path) -> None:
    item_id = store(["--agent-id", "bot", *mem], "-", input="Kept by bot.")

    before = run(*mem, "--agent-id", "bot", "list", "--json").stdout
    after = run("list", "--json", "--agent-id", "bot", *mem).stdout
    assert before == after and [record["id"] for record in json.loads(after)] == [item_id]
    assert run(*mem, "--agent-id", "nobody", "list", "--json", "--agent-id", "bot").stdout == after  # after wins
    nobody = run("list", "--json", *mem, code=1)  # the default agent has nothing: a typo, say so
    assert nobody.stdout == "" and "agents there: bot" in nobody.stderr

    old = run(*mem, "--agent", "bot", "get", item_id)  # the deprecated spelling still works, and says so
    assert old.stdout == "Kept by bot." and "--agent is deprecated; use --agent-id" in old.stderr
    assert run("get", item_id, "--agent", "bot", *mem).stdout == "Kept by bot."
    assert "--agent-id" in run("--help").stdout and "--agent " not in run("--help").stdout

    long = store(["--agent-id", "bot", *mem], "-", input="\n".join(f"Line {n} of a long log." for n in range(3_000)))
    page = json.loads(run("retrieve", long, "--max-tokens", "300", "--json", "--agent-id", "bot", *mem).stdout)
    command = page["next_page_command"]
    assert "--agent-id bot" in command and "--agent " not in command
    follow = CliRunner().invoke(app, shlex.split(command)[1:])
    assert follow.exit_code == 0 and "Line " in follow.stdout


MEMORY_OPTIONS = {"--memory-dir": "memory_dir", "--backend": "backend", "--agent-id": "agent_id", "--agent": "agent"}
"""The memory options (option: parameter), declared once in agent_memory.cli and taken by the app and
every command that opens a memory."""


def _options(command: typer.core.TyperCommand | typer.core.TyperGroup) -> dict[str, typer.core.TyperOption]:
    return {opt: param for param in command.params if isinstance(param, typer.core.TyperOption) for opt in param.opts}


def test_every_memory_command_takes_the_memory_options_as_the_app_does() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    given = {opt: param for opt, param in _options(group).items() if opt in MEMORY_OPTIONS}
    assert set(given) == set(MEMORY_OPTIONS)
    taking = {name for name, command in group.commands.items() if set(MEMORY_OPTIONS) & set(_options(command))}
    assert taking == {*MEMORY_COMMANDS, "inspect"}  # migrate names its stores itself; replay opens none

    def shape(param: typer.core.TyperOption) -> tuple:
        return param.name, param.opts, param.help, param.hidden, param.metavar, param.default, param.multiple

    for name in taking:
        options = _options(group.commands[name])
        for option, parameter in MEMORY_OPTIONS.items():
            assert options[option].name == parameter
            assert shape(options[option]) == shape(given[option]), (name, option)
        listed = [param.opts[0] for param in group.commands[name].params if isinstance(param, typer.core.TyperOption)]
        assert listed[-4:] == list(MEMORY_OPTIONS), name  # after the command's own options, as before
    assert [given[option].hidden for option in MEMORY_OPTIONS] == [False, False, False, True]


@pytest.mark.parametrize("option", list(MEMORY_OPTIONS))
def test_a_command_applies_each_memory_option_given_after_it(
        option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default memory, ./memory, is another, empty one
    for name in ("AGENT_MEMORY_DIR", "AGENT_MEMORY_URL"):
        monkeypatch.delenv(name, raising=False)
    directory = tmp_path / "kept"
    item_id = store(["--memory-dir", str(directory), "--agent-id", "bot"], "-", input="Kept by bot.")
    right, wrong = {
        "--memory-dir": (str(directory), str(tmp_path / "other")),
        "--backend": (directory.as_uri(), (tmp_path / "other").as_uri()),
        "--agent-id": ("bot", "nobody"),
        "--agent": ("bot", "nobody"),
    }[option]
    rest = ["--agent-id", "bot"] if option in ("--memory-dir", "--backend") else ["--memory-dir", str(directory)]

    def listed(before: list[str], after: list[str], code: int = 0) -> Result:
        return run(*before, "list", "--type", "custom", "--json", *after, code=code)

    if option in ("--memory-dir", "--backend"):  # without the option: ./memory, where nothing is stored: no error
        empty = listed(rest, [])
        assert "Nothing is stored" in empty.stderr and json.loads(empty.stdout) == []
    else:  # the default agent, in a memory where only bot has stored: a mistyped agent id
        assert "has stored nothing" in listed(rest, [], code=1).stderr
    for before in (rest, [option, wrong, *rest]):  # given after the command, it beats one given before it
        result = listed(before, [option, right])
        assert [record["id"] for record in json.loads(result.stdout)] == [item_id]
        assert ("--agent is deprecated" in result.stderr) == (option == "--agent")


def _inspect_says(tmp_path: Path, *args: str) -> list[str]:
    """What ``agent-memory ARGS --port 0`` (an ``inspect``, run in a process) says on stderr before its
    "Inspecting ... at URL" line, which it prints once it listens (then it is stopped)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for name in ("AGENT_MEMORY_DIR", "AGENT_MEMORY_URL"):
        env.pop(name, None)
    command = subprocess.Popen([sys.executable, "-m", "agent_memory.cli", *args, "--port", "0",
                                "--price-model", "none"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert command.stderr is not None
        said: list[str] = []
        while not said or not said[-1].startswith("Inspecting "):
            said.append(command.stderr.readline())
            assert said[-1], said  # the command ended before serving
        return said[:-1]
    finally:
        command.terminate()
        command.wait(timeout=30)


def test_inspect_takes_the_agent_named_before_or_after_it(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    with AgentMemory("moth", root, config=LIBRARY) as memory:
        memory.store("moth note", type="custom")
    missing = ("warning: no agent 'nobody' in this backend (yet): its pages say so; the agents page lists those "
               "there are\n")
    assert _inspect_says(tmp_path, "inspect", str(root)) == []  # none named: the agent with the most items
    assert _inspect_says(tmp_path, "--agent-id", "moth", "inspect", str(root)) == []
    assert _inspect_says(tmp_path, "--agent-id", "nobody", "inspect", str(root)) == [missing]
    assert _inspect_says(tmp_path, "--agent-id", "moth", "inspect", str(root), "--agent", "nobody") == [
        "warning: --agent is deprecated; use --agent-id\n", missing]
