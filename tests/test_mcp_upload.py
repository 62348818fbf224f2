"""Large text through ``store_memory`` (issue #20, finding 10): in parts (an upload kept on disk)
and by a path under a directory the user allows (``serve-mcp --allow-read DIR``).

The MCP tests drive real ``agent-memory serve-mcp`` processes with the SDK's own client and read
the stored items back with ``AgentMemory.get``: a real page of ``../shared/data/webpages``, larger
than one call may carry, comes back byte for byte. The protocol's edges (a retried part, a retried
last part, expiry, the bounds) are checked in-process through ``MemoryToolkit.dispatch``, which is
what the server runs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import StdioServerParameters
from test_mcp_server import AGENT_MEMORY, SERVER_ENV, StdioSession, text_of

import actions.store as store_module
from actions import MemoryToolkit
from actions.store import MAX_CONTENT_CHARS, UPLOADS_DIR, StoreMemoryAction, StoreMemoryUploadAction
from agent_memory import AgentMemory, ConfigurationError, MemoryConfig
from agent_memory.tokens import default_token_counter

ROOT = Path(__file__).resolve().parent.parent
PAGES = "webpages/readability"
UPLOADED_PAGE = "ars-1"  # 55,962 characters of HTML: 7 parts
PATH_PAGE = "lemonde-1"  # 86,694 characters, 611 of them not ASCII
AGENT = "upload-test"
LIBRARY = MemoryConfig(index_on_store=False)


def server(memory_dir: Path, *extra: str) -> StdioSession:
    return StdioSession(StdioServerParameters(
        command=str(AGENT_MEMORY),
        args=["serve-mcp", "--memory-dir", str(memory_dir), "--agent-id", AGENT, *extra],
        env=SERVER_ENV,
        cwd=str(memory_dir.parent),
    ))


def parts_of(text: str, size: int = MAX_CONTENT_CHARS) -> list[str]:
    return [text[start:start + size] for start in range(0, len(text), size)]


def send_parts(session: Any, parts: list[str], *, handle: str | None = None, last: bool = True,
               **first: Any) -> tuple[Any, str | None]:
    """Send ``parts`` as store_memory calls, continuing ``handle`` (None: a new upload); the
    final one without ``more`` if ``last``. Returns the last answer and the next handle."""
    answer = None
    for n, part in enumerate(parts):
        final = last and n == len(parts) - 1
        arguments = {"content": part, **({"upload": handle} if handle else first)}
        if not final:
            arguments["more"] = True
        answer = session.call("store_memory", arguments) if isinstance(session, StdioSession) else session(arguments)
        data = answer.structured_content if isinstance(session, StdioSession) else answer.data
        assert data is not None and "error" not in data, answer
        handle = data.get("upload")
    return answer, handle


# -- over MCP --------------------------------------------------------------------------------------
@pytest.mark.data
def test_a_real_page_in_parts_across_a_restart_and_by_path(tmp_path: Path, data_dir: Path) -> None:
    pages = data_dir / PAGES
    page = (pages / UPLOADED_PAGE / "source.html").read_bytes()
    text = page.decode("utf-8")
    parts = parts_of(text)
    assert len(text) > MAX_CONTENT_CHARS and len(parts) == 7
    memory_dir = tmp_path / "memory"

    with server(memory_dir) as first:  # no --allow-read: text only
        (tool,) = [tool for tool in first.tools() if tool.name == "store_memory"]
        assert "Max 8,000 characters a call" in tool.description and "more=true" in tool.description
        assert "path" not in tool.input_schema["properties"]
        too_long = first.call("store_memory", {"content": text})
        assert too_long.is_error and "8000" in text_of(too_long)
        refused = first.call("store_memory", {"path": str(pages / UPLOADED_PAGE / "source.html")})
        assert refused.is_error and refused.structured_content == {"error": "invalid_arguments"}
        assert "reads no files here" in text_of(refused)
        _, handle = send_parts(first, parts[:3], last=False, title="Minecraft exploit", tags=["security"])
        assert handle is not None and handle.endswith("-4")
    # The server is gone; its upload is on disk. A new server takes the rest.
    with server(memory_dir, "--allow-read", str(pages)) as second:
        done, _ = send_parts(second, parts[3:], handle=handle)
        data = done.structured_content
        assert data["parts"] == 7 and data["title"] == "Minecraft exploit" and data["tags"] == ["security"]
        assert text_of(done).startswith(f"Stored as {data['id']}")

        by_path = second.call("store_memory", {"path": f"{PATH_PAGE}/source.html", "tags": ["news"]})
        assert not by_path.is_error, text_of(by_path)
        assert by_path.structured_content["type"] == "web_content"

        outside = tmp_path / "secret.txt"
        outside.write_text("not for the model", encoding="utf-8")
        before = len(AgentMemory(AGENT, memory_dir, config=LIBRARY))
        for bad in ("../../../../../etc/passwd", f"{PATH_PAGE}/../../../webpages", str(outside), "/etc/passwd"):
            result = second.call("store_memory", {"path": bad})
            assert result.is_error and result.structured_content == {"error": "invalid_arguments"}, bad
            assert "is outside" in text_of(result) or "not a readable file" in text_of(result), text_of(result)
        assert len(AgentMemory(AGENT, memory_dir, config=LIBRARY)) == before

    memory = AgentMemory(AGENT, memory_dir, config=LIBRARY)
    assert memory.get(data["id"]).content.encode("utf-8") == page  # byte for byte
    stored = memory.get(by_path.structured_content["id"])
    assert stored.content.encode("utf-8") == (pages / PATH_PAGE / "source.html").read_bytes()
    assert stored.metadata.media_type == "text/html" and stored.metadata.tags == ("news",)
    assert not any((memory.path / UPLOADS_DIR).glob("*/part-*"))  # the parts are gone once stored


def test_a_symlink_out_of_the_allowed_directory_is_refused(tmp_path: Path) -> None:
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    allowed.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("the launch code is 0000", encoding="utf-8")
    (allowed / "notes.txt").write_text("the meeting moved to Tuesday", encoding="utf-8")
    (allowed / "innocent.txt").symlink_to(elsewhere / "secret.txt")
    (allowed / "door").symlink_to(elsewhere, target_is_directory=True)
    (allowed / "inner.txt").symlink_to(allowed / "notes.txt")
    memory = AgentMemory("files", tmp_path / "memory", config=LIBRARY)
    toolkit = MemoryToolkit(memory, read_dir=allowed)
    assert str(allowed) in toolkit.get("store_memory").description

    for bad in ("innocent.txt", "door/secret.txt", "../elsewhere/secret.txt", str(elsewhere / "secret.txt"),
                "door/missing.txt", "~/x"):
        result = toolkit.dispatch("store_memory", {"path": bad})
        assert not result.ok and result.error == "invalid_arguments", (bad, result.content)
        assert "is outside" in result.content and "launch code" not in result.content
    assert toolkit.dispatch("store_memory", {"path": "missing.txt"}).error == "not_found"
    assert toolkit.dispatch("store_memory", {"path": "."}).error == "invalid_arguments"
    assert toolkit.dispatch("store_memory", {"path": "a\x00b"}).error == "invalid_arguments"
    assert len(memory) == 0
    inner = toolkit.dispatch("store_memory", {"path": "inner.txt"})  # a link that stays inside is fine
    assert inner.ok and memory.get(inner.data["id"]).content == "the meeting moved to Tuesday"

    with pytest.raises(ConfigurationError):
        MemoryToolkit(memory, read_dir=tmp_path / "missing")


# -- the protocol, in-process ----------------------------------------------------------------------
@pytest.fixture
def toolkit(tmp_path: Path) -> MemoryToolkit:
    return MemoryToolkit(AgentMemory("uploads", tmp_path / "memory", config=LIBRARY), uploads=True)


def call(toolkit: MemoryToolkit) -> Any:
    return lambda arguments: toolkit.dispatch("store_memory", arguments)


def test_a_retried_part_is_kept_once_and_a_retried_last_part_stores_once(toolkit: MemoryToolkit) -> None:
    memory = toolkit.memory
    text = "".join(f"Paragraph {n}: é ünïcode — 🚀 and plain words. " for n in range(600))
    parts = parts_of(text, 7_000)
    first = toolkit.dispatch("store_memory", {"content": parts[0], "more": True})
    handle = first.data["upload"]
    second = toolkit.dispatch("store_memory", {"content": parts[1], "upload": handle, "more": True})
    again = toolkit.dispatch("store_memory", {"content": parts[1], "upload": handle, "more": True})  # a retry
    assert again.ok and again.data == second.data
    changed = toolkit.dispatch("store_memory", {"content": "other text", "upload": handle, "more": True})
    assert changed.error == "invalid_arguments" and "received already" in changed.content
    skipped = toolkit.dispatch("store_memory", {"content": parts[3], "upload": handle.replace("-2", "-4")})
    assert skipped.error == "invalid_arguments" and second.data["upload"] in skipped.content

    _, handle = send_parts(call(toolkit), parts[2:-1], handle=second.data["upload"], last=False)
    last = toolkit.dispatch("store_memory", {"content": parts[-1], "upload": handle})
    retried = toolkit.dispatch("store_memory", {"content": parts[-1], "upload": handle})
    assert last.ok and retried.ok and retried.data == last.data
    assert len(memory) == 1 and memory.get(last.data["id"]).content == text
    late = toolkit.dispatch("store_memory", {"content": "more", "upload": second.data["upload"]})
    assert late.error == "invalid_arguments" and "finished" in late.content


def test_the_one_tool_form_uploads_too(tmp_path: Path) -> None:
    toolkit = MemoryToolkit(AgentMemory("single", tmp_path / "memory", config=LIBRARY), form="single", uploads=True)
    started = toolkit.dispatch("memory", {"op": "store", "content": "first half, ", "more": True})
    done = toolkit.dispatch("memory", {"op": "store", "content": "second half", "upload": started.data["upload"]})
    assert done.ok and toolkit.memory.get(done.data["id"]).content == "first half, second half"
    assert "in parts" in toolkit.tool_definitions()[0]["function"]["description"]  # the one tool says how
    plain = MemoryToolkit(toolkit.memory, form="single")
    assert "in parts" not in plain.tool_definitions()[0]["function"]["description"]


def test_abandoned_uploads_expire(toolkit: MemoryToolkit) -> None:
    stale = toolkit.dispatch("store_memory", {"content": "forgotten", "more": True}).data["upload"]
    upload_dir = toolkit.memory.path / UPLOADS_DIR / stale[3:15]
    long_ago = upload_dir.stat().st_mtime - store_module.UPLOAD_TTL_S - 60
    os.utime(upload_dir, (long_ago, long_ago))

    fresh = toolkit.dispatch("store_memory", {"content": "new", "more": True})  # any upload call sweeps
    assert fresh.ok and not upload_dir.exists()
    gone = toolkit.dispatch("store_memory", {"content": "end", "upload": stale})
    assert gone.error == "not_found" and "expired" in gone.content


def test_uploads_are_bounded(toolkit: MemoryToolkit, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "MAX_UPLOAD_PARTS", 3)
    monkeypatch.setattr(store_module, "MAX_OPEN_UPLOADS", 2)
    _, handle = send_parts(call(toolkit), ["a", "b", "c"], last=False)
    over = toolkit.dispatch("store_memory", {"content": "d", "upload": handle, "more": True})
    assert over.error == "invalid_arguments" and "at most 3 parts" in over.content
    keep = re.search(r'upload="(up_[0-9a-f]{12}-3)"', over.content).group(1)  # the answer says how to finish
    assert toolkit.dispatch("store_memory", {"content": "c", "upload": keep}).ok

    for _ in range(2):
        assert toolkit.dispatch("store_memory", {"content": "x", "more": True}).ok
    third = toolkit.dispatch("store_memory", {"content": "x", "more": True})
    assert third.error == "invalid_arguments" and "unfinished" in third.content


@pytest.mark.parametrize("arguments", [
    {"content": "x", "upload": "up_zz"},
    {"content": "x", "upload": "up_0123456789ab-0"},
    {"content": "x", "upload": "../../etc"},
    {"content": "", "more": True},
    {"content": "x\udfff", "more": True},
    {"content": "x", "more": True, "title": "\ud800"},
    {"content": "x", "more": "maybe"},
])
def test_bad_upload_calls_are_tool_errors_that_change_nothing(toolkit: MemoryToolkit, arguments: dict) -> None:
    result = toolkit.dispatch("store_memory", json.dumps(arguments))
    assert not result.ok and result.error == "invalid_arguments", result.content
    assert not (toolkit.memory.path / UPLOADS_DIR).exists() or not any((toolkit.memory.path / UPLOADS_DIR).iterdir())


def test_an_agent_loop_keeps_the_small_tool_unless_it_asks(tmp_path: Path) -> None:
    memory = AgentMemory("plain", tmp_path / "memory", config=LIBRARY)
    plain = MemoryToolkit(memory)
    assert type(plain.get("store_memory")) is StoreMemoryAction
    assert "max 8,000 characters" in StoreMemoryAction.description  # the limit, where the model reads it
    refused = plain.dispatch("store_memory", {"content": "x", "more": True})
    assert refused.error == "invalid_arguments" and "has no argument 'more'" in refused.content
    assert "at most 8,000" in plain.dispatch("store_memory", {"path": "a.txt"}).content
    assert not (memory.path / UPLOADS_DIR).exists()
    with pytest.raises(ValueError, match="no StoreMemoryAction"):
        MemoryToolkit(memory, [], uploads=True)


UPLOAD_FIELDS = ["content", "title", "tags", "more", "upload", "path"]
upload_values = st.sampled_from([
    "x", "", " ", "part", "x" * 8_000, "x" * 8_001, "\ud800", "é🚀", True, False, 0, 2, None, [], ["t"], ["x" * 41],
    "up_0123456789ab-2", "up_0123456789ab-0", "up_0123456789ab-99999", "up_../../x-2", "mem_000000000000",
    "../../etc/passwd", "/etc/passwd", "notes.txt", "link.txt", ".", "a\x00b", "~/x",
]) | st.text(max_size=30)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> MemoryToolkit:
    """A toolkit with uploads and a readable directory holding a file and a symlink out of it."""
    allowed = tmp_path_factory.mktemp("fuzz-allowed")
    (allowed / "notes.txt").write_text("kept notes", encoding="utf-8")
    (allowed / "link.txt").symlink_to("/etc/passwd")
    return MemoryToolkit(AgentMemory("fuzz", tmp_path_factory.mktemp("fuzz") / "m", config=LIBRARY), read_dir=allowed)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.dictionaries(st.sampled_from(UPLOAD_FIELDS), upload_values, max_size=4))
def test_fuzzed_store_calls_with_uploads_and_files_never_raise(raw: dict, fuzzed: MemoryToolkit) -> None:
    toolkit, memory = fuzzed, fuzzed.memory
    before = memory.records()
    result = toolkit.dispatch("store_memory", raw)
    if result.ok:
        assert result.data is not None and ("id" in result.data or "upload" in result.data)
    else:
        assert result.error in {"invalid_arguments", "not_found"}, result.content
        assert result.content.startswith("Error: ") and len(result.content) < 2_000
        assert memory.records() == before  # a refused call stores nothing
        assert "root:" not in result.content  # nothing of a file outside the directory


# -- what the schema costs -------------------------------------------------------------------------
def test_the_docs_state_the_store_tool_sizes() -> None:
    count = default_token_counter().count
    readme = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    plain = count(json.dumps(StoreMemoryAction.openai_schema()))
    row = re.search(r"^\| `store_memory` \| (\d+) \|", readme, re.M)
    assert row is not None and int(row.group(1)) == plain
    assert plain <= 159  # issue #6: the three tools an agent loop offers stay within 600 tokens
    served = count(json.dumps(StoreMemoryUploadAction().openai_schema()))
    assert f"{served} tokens as `serve-mcp` offers it" in readme
    with_files = StoreMemoryUploadAction(ROOT)
    assert str(ROOT) in with_files.description and "path" in with_files.parameters_schema()["properties"]
    assert "path" not in StoreMemoryUploadAction().parameters_schema()["properties"]
