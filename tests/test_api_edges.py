"""The edges a new user met first (issue 27, item 10): transform fields as keywords, a hit's title,
a short ``print`` of a hit, errors that name the bad argument and say what works, and a CLI that
tells a mistyped agent id from an empty memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_memory import AgentMemory, InvalidArgumentError, MemoryConfig
from agent_memory.errors import TransformError
from agent_memory.cli import app
from agent_memory.transforms import parse_transform

BRIEF = ("The ACLU filed an amicus brief on Tuesday.\nTotal pages: 31\n"
         + "Background on the case and the lower court's ruling.\n" * 40 + "The ACLU asked for a rehearing.\n")


@pytest.fixture
def memory(tmp_path: Path) -> AgentMemory:
    return AgentMemory("edges", tmp_path / "memory")


def test_transform_fields_as_keywords(memory: AgentMemory) -> None:
    item_id = memory.store(BRIEF, title="Amicus brief")
    excerpt = memory.retrieve(item_id, "excerpt", around="ACLU")
    assert excerpt.transform.type == "excerpt" and excerpt.transform.around == "ACLU"  # type: ignore[union-attr]
    assert excerpt.content == memory.retrieve(item_id, {"type": "excerpt", "around": "ACLU"}).content
    assert memory.retrieve(item_id, around="rehearing").transform.type == "excerpt"  # the one transform with it
    assert memory.retrieve(item_id, pattern="^Total").content.count("Total pages: 31") == 1
    assert memory.retrieve(item_id, "first_n", n=1).content.strip() == "The ACLU filed an amicus brief on Tuesday."
    with pytest.raises(TransformError, match="first_n and last_n"):
        memory.retrieve(item_id, n=3)  # fits two transforms: say which
    with pytest.raises(TypeError, match="aroud"):
        memory.retrieve(item_id, aroud="ACLU")  # type: ignore[call-arg]  # typed keywords: Python names a typo
    with pytest.raises(InvalidArgumentError, match="no transform has .aroud.*around"):
        parse_transform(None, aroud="ACLU")  # the same typo in a dict-free spec: the fields are listed
    with pytest.raises(TransformError, match="not both"):
        memory.retrieve(item_id, {"type": "excerpt", "around": "ACLU"}, around="court")


def test_a_hit_shows_its_title_and_prints_short(memory: AgentMemory) -> None:
    item_id = memory.store(BRIEF, title="Amicus brief", source="https://example.org/brief")
    (hit,) = memory.query("amicus brief", limit=1)
    assert hit.item.title == "Amicus brief" and hit.item.source == "https://example.org/brief"
    printed = str(hit)
    assert item_id in printed and "Amicus brief" in printed and "score=" in printed
    assert "content_sha256" not in printed and len(printed) < 400  # not the whole record
    assert len(repr(memory.retrieve(item_id))) < 400 and len(repr(memory.get(item_id))) < 400


def test_errors_name_the_argument_and_what_works(memory: AgentMemory) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^type must be one of .*'web_content'.*got 'bogus'"):
        memory.store("x", type="bogus")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"a str: memory.query\('heron'\)"):
        memory.query(123)  # type: ignore[arg-type]
    assert len(memory) == 0


def test_cli_tells_a_mistyped_agent_from_an_empty_memory(tmp_path: Path) -> None:
    where = str(tmp_path / "memory")
    runner = CliRunner()
    AgentMemory("real", where, config=MemoryConfig(index_on_store=False)).store("The lighthouse keeper's log.")
    for args in (["list", "--agent-id", "nosuchagent"], ["query", "keeper", "--agent-id", "nosuchagent"],
                 ["export", "--agent-id", "nosuchagent"]):
        result = runner.invoke(app, ["--memory-dir", where, *args])
        assert result.exit_code == 1, args
        assert "'nosuchagent' has stored nothing" in result.output and "agents there: real" in result.output
    listed = runner.invoke(app, ["--memory-dir", where, "list", "--agent-id", "real"])
    assert listed.exit_code == 0 and "1 item" in listed.output
    for args in (["list"], ["stats"]):  # an empty memory is no error, for any command that reads it
        empty = runner.invoke(app, ["--memory-dir", str(tmp_path / "empty"), *args])
        assert empty.exit_code == 0, args
    empty = runner.invoke(app, ["--memory-dir", str(tmp_path / "empty"), "list"])
    assert "Nothing is stored" in empty.output


def test_cli_query_of_empty_text_says_what_to_do(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--memory-dir", str(tmp_path / "memory"), "query", "  "])
    assert result.exit_code == 1
    assert "query text is empty" in result.output and "leave TEXT out" in result.output
    assert "MemoryCriteria" not in result.output and "text=None" not in result.output
