"""The ``agent-memory`` command, run in-process with typer's CliRunner on real components: a real
memory directory, the real embedding model and Chroma index, real readability pages."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from agent_memory import AgentMemory
from agent_memory.cli import app
from agent_memory.models.items import ItemRecord, QueryHit
from agent_memory.tokens import TiktokenCounter

PAGES = "webpages/readability"
TARGET_PAGE = "ars-1"  # "Just-released Minecraft exploit makes it easy to crash game servers"
DISTRACTOR_PAGES = ("tumblr", "ehow-1", "simplyfound-1")  # tumblr is about Minecraft too


class Cli:
    """Runs ``agent-memory --memory-dir <tmp> ...`` in-process."""

    def __init__(self, memory_dir: Path) -> None:
        self.memory_dir = memory_dir
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | bytes | None = None, code: int = 0) -> Result:  # noqa: A002
        result = self.runner.invoke(app, ["--memory-dir", str(self.memory_dir), *args], input=input)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
        return result

    def json(self, *args: str, input: str | None = None) -> list | dict:  # noqa: A002
        return json.loads(self(*args, "--json", input=input).stdout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "memory")


@pytest.mark.data
def test_real_page_store_query_retrieve(cli: Cli, data_dir: Path) -> None:
    pages = data_dir / PAGES
    target = pages / TARGET_PAGE / "source.html"
    title = json.loads((pages / TARGET_PAGE / "expected-metadata.json").read_text(encoding="utf-8"))["title"]
    stored = cli.json("store", str(target), *(str(pages / name / "source.html") for name in DISTRACTOR_PAGES))
    assert len(stored) == 4
    page = stored[0]
    assert page["type"] == "web_content"
    assert page["metadata"]["media_type"] == "text/html"
    assert page["metadata"]["title"] == title
    assert page["metadata"]["source"] == str(target)

    hits = cli.json("query", "Who reported the Minecraft server crash bug to Mojang?", "--limit", "3")
    assert [hit["item"]["id"] for hit in hits][0] == page["id"]
    assert -1.0 <= hits[0]["score"] <= 1.0 and hits[0]["chunk"]

    table = cli("query", "Minecraft exploit that crashes game servers").stdout
    assert page["id"] in table and "best first" in table
    # a page's size reads as the memory tools give it: its text's tokens, then its markup's
    meta = {record["id"]: record for record in cli.json("list")}[page["id"]]["metadata"]  # counted by now
    assert meta["text_tokens"] is not None and meta["tokens"] > meta["text_tokens"]
    assert f"{meta['text_tokens']:,} as text" in cli("list").stdout
    # how well a hit matches reads the same as the memory tools show it: its similarity
    hits = cli.json("query", "Minecraft exploit that crashes game servers")
    first = hits[0]
    assert first["similarity"] is not None and f"similarity {first['similarity']:.2f}" in table
    record = ItemRecord.model_validate(first["item"])
    assert QueryHit(item=record, score=0.016, similarity=0.8012).match == "similarity 0.80"
    assert QueryHit(item=record, score=0.016).match == "keyword match"  # found by its keywords only
    assert QueryHit(item=record).match is None  # a query without text

    excerpt = cli("retrieve", page["id"], "--around", "Ammar Askar", "--context-chars", "200").stdout
    assert "Ammar Askar" in excerpt and "Mojang" in excerpt
    assert "<div" not in excerpt  # the page's text, not its markup
    assert "[chars " in excerpt

    markup = cli("retrieve", page["id"], "--raw", "--transform", "first_n", "--n", "5").stdout
    assert markup.lstrip().lower().startswith("<!doctype html")


def _generated_page(size_bytes: int) -> str:
    """A ~``size_bytes`` HTML article of distinct numbered paragraphs."""
    parts = ["<!doctype html><html><head><title>Generated field report</title></head><body><article>",
             "<h1>Generated field report</h1>"]
    i = 0
    while sum(map(len, parts)) < size_bytes:
        parts.append(
            f"<p>Observation {i}: station {i % 97} logged a temperature of {(i * 7) % 41} degrees, "
            f"wind from bearing {(i * 13) % 360} at {(i * 3) % 55} km/h, and {i % 11} sightings of "
            f"migrating birds near checkpoint {i * 31 % 1009}.</p>"
        )
        i += 1
    parts.append("</article></body></html>")
    return "\n".join(parts)


def test_large_page_is_capped_and_paged(cli: Cli, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(_generated_page(1_000_000), encoding="utf-8")
    assert page.stat().st_size >= 1_000_000
    (item_id,) = cli("store", str(page), "--no-index", "--quiet").stdout.split()

    counter = TiktokenCounter()
    first = cli("retrieve", item_id).stdout
    assert counter.count(first) <= 4_000
    content, _, footer = first.rpartition("\n[page ")
    assert content.startswith("Title: Generated field report")
    assert 3_000 < counter.count(content) <= 4_000
    assert footer.startswith("1 of ")
    command = footer.split("next page: ", 1)[1].rstrip().rstrip("]")
    words = shlex.split(command)
    assert words[0] == "agent-memory" and words[-2:] == ["--page", "2"]

    second = CliRunner().invoke(app, words[1:])
    assert second.exit_code == 0, second.stderr
    assert counter.count(second.stdout) <= 4_000
    assert "\n[page 2 of " in second.stdout
    assert second.stdout.split("\n[page ")[0] not in first

    capped = cli("retrieve", item_id, "--max-tokens", "500", "--json")
    data = json.loads(capped.stdout)
    assert data["tokens"] <= 500 and data["pages"] > 10 and data["next_page_command"].endswith("--page 2")
    assert "--max-tokens 500" in data["next_page_command"]


def test_store_directory_recursively(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "notes.txt").write_text("The deploy key rotates every 90 days.\n", encoding="utf-8")
    (root / "sub" / "config.json").write_text(json.dumps({"retries": 3, "hosts": ["a", "b"]}), encoding="utf-8")
    (root / "sub" / "deeper" / "page.htm").write_text(
        "<html><head><title>Runbook</title></head><body><p>Restart the queue worker first.</p></body></html>",
        encoding="utf-8",
    )
    (root / "sub" / "blob.bin").write_bytes(bytes(range(256)))

    stored = cli.json("store", str(root), "--tag", "Docs", "--source", "repo")
    by_name = {Path(record["metadata"]["extra"]["path"]).name: record for record in stored}
    assert sorted(by_name) == ["blob.bin", "config.json", "notes.txt", "page.htm"]
    assert {record["metadata"]["source"] for record in stored} == {"repo"}
    assert all(record["metadata"]["tags"] == ["docs"] for record in stored)
    assert by_name["notes.txt"]["type"] == "file"
    assert by_name["notes.txt"]["metadata"]["content_encoding"] == "text"
    assert by_name["config.json"]["metadata"]["content_encoding"] == "json"
    assert by_name["page.htm"]["type"] == "web_content"
    assert by_name["page.htm"]["metadata"]["media_type"] == "text/html"
    assert by_name["page.htm"]["metadata"]["title"] == "Runbook"
    assert by_name["blob.bin"]["metadata"]["content_encoding"] == "bytes"

    memory = AgentMemory("default", cli.memory_dir)
    assert memory.get(by_name["config.json"]["id"]).content == {"retries": 3, "hosts": ["a", "b"]}
    assert memory.get(by_name["blob.bin"]["id"]).content == bytes(range(256))

    rows = cli("retrieve", by_name["config.json"]["id"], "--json-path", "hosts.1").stdout
    assert rows.strip() == '"b"'
    hits = cli.json("query", "how often is the deploy key rotated", "--tag", "docs", "--limit", "1")
    assert hits[0]["item"]["id"] == by_name["notes.txt"]["id"]
    assert cli("rebuild-index").stdout.strip() == "Indexed 4 item(s)."


def test_store_jsonl_and_stdin_then_list(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "results.jsonl"
    lines.write_text(
        "\n".join([
            json.dumps({"content": "SELECT name FROM Artist LIMIT 2 -> AC/DC, Accept", "type": "database_result",
                        "source": "sqlite", "tags": ["music"], "title": "artists"}),
            "",
            json.dumps({"id": 7, "status": "shipped", "items": [1, 2]}),
            json.dumps({"content": {"rows": [[1, "x"]]}, "title": "rows"}),
        ]) + "\n",
        encoding="utf-8",
    )
    stored = cli.json("store", str(lines), "--type", "action_result", "--tag", "batch")
    assert [record["type"] for record in stored] == ["database_result", "action_result", "action_result"]
    assert stored[0]["metadata"]["source"] == "sqlite"
    assert stored[0]["metadata"]["tags"] == ["batch", "music"]
    assert stored[1]["metadata"]["content_encoding"] == "json"
    assert stored[1]["metadata"]["extra"]["line"] == 3
    assert stored[2]["metadata"]["title"] == "rows"
    memory = AgentMemory("default", cli.memory_dir)
    assert memory.get(stored[1]["id"]).content == {"id": 7, "status": "shipped", "items": [1, 2]}

    (from_stdin,) = cli("store", "-", "--no-index", "-q", input="piped tool output\n").stdout.split()
    assert memory.get(from_stdin).content == "piped tool output\n"

    listed = cli.json("list")
    assert [record["id"] for record in listed] == [from_stdin] + [record["id"] for record in reversed(stored)]
    assert [record["id"] for record in cli.json("list", "--type", "database_result")] == [stored[0]["id"]]
    assert len(cli.json("list", "--limit", "2")) == 2
    table = cli("list").stdout
    assert all(record["id"] in table for record in listed)

    newest = cli.json("query", "--type", "action_result")  # no text: newest first, through the index
    assert [hit["item"]["id"] for hit in newest] == [stored[2]["id"], stored[1]["id"]]
    assert cli.json("query", "--since", "2999-01-01") == []
    assert len(cli.json("query", "--until", "2999-01-01T00:00Z", "--limit", "10")) == 4


def test_errors_exit_with_code_1_and_a_message(cli: Cli, tmp_path: Path) -> None:
    (item_id,) = cli("store", "-", "--no-index", "-q", input="short text").stdout.split()

    unknown = cli("retrieve", "mem_000000000000", code=1)
    assert "no memory item 'mem_000000000000'" in unknown.stderr and "Traceback" not in unknown.output
    assert "invalid memory id" in cli("retrieve", "not-an-id", code=1).stderr
    assert "unknown transform 'bogus'" in cli("retrieve", item_id, "--transform", "bogus", code=1).stderr
    assert "does not apply" in cli("retrieve", item_id, "--transform", "excerpt", "--pattern", "x", code=1).stderr
    assert "different transforms" in cli("retrieve", item_id, "--around", "x", "--pattern", "y", code=1).stderr
    assert "page 2 does not exist" in cli("retrieve", item_id, "--page", "2", code=1).stderr
    assert "invalid regular expression" in cli("retrieve", item_id, "--pattern", "(", code=1).stderr
    assert "need JSON content" in cli("retrieve", item_id, "--json-path", "a.b", code=1).stderr
    assert "no such file" in cli("store", str(tmp_path / "missing.txt"), code=1).stderr
    assert "unknown type" in cli("store", "-", "--type", "nope", input="x", code=1).stderr

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\n[1, 2]\n', encoding="utf-8")
    assert f"{bad}:2: each line must be a JSON object" in cli("store", str(bad), code=1).stderr
    assert len(cli.json("list")) == 1  # nothing of the bad file was stored

    assert cli("query", "x", "--since", "yesterday", code=2).exit_code == 2  # usage error
    assert "invalid agent id" in cli("--agent", "../escape", "list", code=1).stderr.lower()


def test_transform_options_by_their_names_in_errors_and_the_next_page(cli: Cli) -> None:
    log = "\n".join(f"line {n}: whale {n % 7}" for n in range(3_000))
    (item_id,) = cli("store", "-", "--no-index", "-q", input=log).stdout.split()

    page = cli.json("retrieve", item_id, "--keyword", "whale 1", "--context-lines", "1", "--keyword", "whale 2",
                    "--max-tokens", "200")
    assert page["pages"] > 1 and "L3: line 2: whale 2" in page["content"]
    words = shlex.split(page["next_page_command"])
    assert words[words.index("retrieve"):] == [
        "retrieve", item_id, "--transform", "filtered", "--keyword", "whale 1", "--keyword", "whale 2",
        "--context-lines", "1", "--max-tokens", "200", "--page", "2"]  # retrieve's order, not the typed one

    mixed = cli("retrieve", item_id, "--pattern", "x", "--n", "3", "--around", "y", code=1).stderr
    assert "--around, --n, --pattern belong to different transforms; choose one with --transform" in mixed
    misplaced = cli("retrieve", item_id, "--transform", "excerpt", "--summary-tokens", "50", code=1).stderr
    assert "--summary-tokens does not apply to the excerpt transform (it is for: summary)" in misplaced
    short, long = (cli.json("retrieve", item_id, "--summary-tokens", tokens) for tokens in ("40", "400"))
    assert short["transform"] == {"type": "summary", "max_tokens": 40} and short["tokens"] <= 40 < long["tokens"]
