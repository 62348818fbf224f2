"""The inspector (``agent-memory inspect``) on a real memory: a MemoryAgent run through the real
openai SDK against the scripted loopback server, with a compaction and two sub-agents (shared and
isolated), the real embedding model, and a stored page carrying ``<script>`` and an ``onerror``
attribute. The server runs on 127.0.0.1 in a thread; its pages are checked over HTTP and in a real
headless Chromium (Debian's ``chromium`` through ``/usr/bin/chromedriver``, installed by ``make
venv``: nothing is downloaded). Under ``CI=true`` a missing browser fails the browser test."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.agent.config import AgentConfig
from agent_memory.agent.loop import MemoryAgent
from agent_memory.agent.tools import tool
from agent_memory.cli import app
from agent_memory.errors import ConfigurationError, StoreError
from agent_memory.inspector import (
    CONTENT_SECURITY_POLICY,
    Inspector,
    InspectorServer,
    ReadOnlyBackend,
    agent_scopes,
    check_bind_host,
)
from agent_memory.llm.chat import OpenAIChatModel
from agent_memory.pricing import PriceModel
from agent_memory.replay.engine import RunResult, StrategyCurve
from agent_memory.replay.report import summarize
from agent_memory.replay.report_plots import write_report
from agent_memory.replay.strategies import MASKING, NAIVE
from agent_memory.storage import open_backend
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

PAYLOAD = '<script>alert(1)</script><img src=x onerror="window.__pwned=1">'
HOSTILE_PAGE = f"""<html><head><title>Heron colonies</title></head><body><main>
<h1>Where herons nest</h1>
<p>Grey herons nest in colonies called heronries, high in tall trees near water.</p>
<p>A heronry can hold dozens of nests, reused and repaired every spring.</p>
{PAYLOAD}
</main></body></html>"""
PAGES = {
    "https://example.org/herons": HOSTILE_PAGE,
    "https://example.org/bridge": "<html><head><title>The bridge</title></head><body><main><h1>The bridge</h1>"
                                  "<p>The bridge opens at nine every morning and closes at dusk.</p>" * 20
                                  + "</main></body></html>",
    "https://example.org/tides": "Tide tables for the estuary: high water 06:12 and 18:40. " * 40,
}


def call(name: str, **arguments: object) -> ScriptedReply:
    return ScriptedReply(tool_calls=(ScriptedToolCall(name, json.dumps(arguments)),))


@tool
def fetch_page(url: str) -> str:
    """Fetch a web page.

    Args:
        url: the page's address.
    """
    return PAGES.get(url, f"404: nothing at {url}")


def build_memory(root: Path) -> None:
    """A researcher's memory: three turns (the hostile page, the bridge, the tides), a compaction
    before the third, a shared and an isolated sub-agent, and a stored note whose title is markup."""
    with FakeLLMServer() as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        config = AgentConfig(allow_sub_agents=True, tail_turns=1)
        with MemoryAgent(model, tools=[fetch_page], system_prompt="You are a research agent.", agent_id="researcher",
                         memory_dir=root, config=config) as agent:
            server.enqueue(call("fetch_page", url="https://example.org/herons"),
                           "Herons nest in colonies called heronries.")
            agent.run("Where do herons nest?")
            server.enqueue(call("fetch_page", url="https://example.org/bridge"),
                           call("fetch_page", url="https://example.org/tides"),
                           "The bridge opens at nine; high water is at 06:12.")
            agent.run("When does the bridge open, and when is high water?")
            agent.manager.request_compaction()
            server.enqueue("Nine in the morning.")
            agent.run("Remind me: when does the bridge open?")
            server.enqueue(call("fetch_page", url="https://example.org/tides"), "High water is at 06:12.")
            agent.spawn("Check the tide table.", memory="shared", agent_id="researcher.tides")
            server.enqueue(call("fetch_page", url="https://example.org/bridge"), "It opens at nine.")
            agent.spawn("Check the bridge's hours.", memory="isolated", agent_id="researcher.bridge")
            agent.memory.store("A note on heron colonies: they nest in tall trees.", type="custom",
                               title=f"note {PAYLOAD}", tags=["herons"])


def build_report(out: Path) -> None:
    """A replay report directory (report.json, tokens.png, cost.png) written by the replay's own code."""
    def curve(prompts: list[int], prefixes: list[int]) -> StrategyCurve:
        return StrategyCurve(prompt_tokens=prompts, message_tokens=prompts, tool_tokens=[0] * len(prompts),
                             prefix_tokens=prefixes)

    curves = {NAIVE: curve([2000, 3000], [0, 2000]), MASKING: curve([2000, 2800], [0, 1500]),
              "full_once": curve([2000, 2500], [0, 1200])}
    results = [RunResult(source="src", run_id=f"r{n}", calls=2, results=1, result_tokens=[900], curves=curves,
                         citation_tokens=[40], roundtrip_ok=1, output_tokens=[100, 50]) for n in range(2)]
    write_report(summarize(results), out)


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (ns)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def memory_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inspected") / "memory"
    build_memory(root)
    return root


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    build_report(out)
    return out


@pytest.fixture(scope="module")
def served(memory_root: Path, report_dir: Path) -> Iterator[tuple[str, dict[str, tuple[int, int]]]]:
    """The inspector on 127.0.0.1 (a free port) and the memory's files as they were before it."""
    before = tree(memory_root)
    inspector = Inspector(memory_root, agent_id="researcher", report_dir=report_dir,
                          price_model=PriceModel.lookup("claude-sonnet-4-6"))
    server = InspectorServer(inspector, host="127.0.0.1", port=0)
    url = server.start()
    try:
        yield url, before
    finally:
        server.stop()


def get(url: str, path: str, **params: str) -> httpx.Response:
    return httpx.get(url.rstrip("/") + path, params=params, timeout=120)


# -- plain HTTP ------------------------------------------------------------------------------------
def test_items_page_lists_and_searches_with_escaped_markup(served: tuple[str, dict], memory_root: Path) -> None:
    url, _ = served
    page = get(url, "/items")
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    html = page.text
    assert "example.org/herons" in html and "example.org/bridge" in html  # titled by their tool calls
    assert "note &lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=" in html  # the note's title, escaped
    assert "<script" not in html and "onerror=\"" not in html
    hits = get(url, "/items", q="where do herons nest")
    assert hits.status_code == 200
    first = re.search(r'class="item-link" href="/items/(mem_[0-9a-f]{12})', hits.text)
    assert first is not None
    memory = AgentMemory("researcher", backend=ReadOnlyBackend(open_backend(str(memory_root), read_only=True)))
    try:
        assert "heron" in memory.get(first.group(1)).metadata.title.lower()
    finally:
        memory.close()
    only_custom = get(url, "/items", type="custom")
    assert "note &lt;script&gt;" in only_custom.text and "example.org/herons" not in only_custom.text
    tagged = get(url, "/items", tag="herons")
    assert "note &lt;script&gt;" in tagged.text and "example.org/bridge" not in tagged.text


def _heron_id(url: str) -> str:
    hits = get(url, "/items", q="heronries in tall trees", type="web_content").text
    ids = re.findall(r'class="item-link" href="/items/(mem_[0-9a-f]{12})', hits)
    for item_id in ids:
        page = get(url, f"/items/{item_id}").text
        if "Where herons nest" in page:
            return item_id
    raise AssertionError(f"the heron page is not among the hits {ids}")


def test_item_page_shows_citation_and_content_as_text(served: tuple[str, dict]) -> None:
    url, _ = served
    item_id = _heron_id(url)
    page = get(url, f"/items/{item_id}")
    assert page.status_code == 200
    html = page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;" in html
    assert "<script" not in html and "<img src=x" not in html
    citation = re.search(r'<pre class="citation" id="citation">(.*?)</pre>', html, re.S)
    assert citation is not None and "example.org/herons" in citation.group(1) and item_id in citation.group(1)
    assert get(url, "/items/mem_000000000000").status_code == 404
    assert get(url, "/items/not-an-id").status_code == 400
    assert get(url, "/items", agent="nobody").status_code == 404


def test_calls_page_shows_each_result_as_the_model_saw_it(served: tuple[str, dict]) -> None:
    url, _ = served
    page = get(url, "/calls", agent="researcher")
    assert page.status_code == 200
    html = page.text
    rows = re.findall(r'<tr id="call-(\d+)">', html)
    assert len(rows) >= 6  # 2 + 3 + 1 calls, and the spawns' tool results
    assert re.search(r'<span class="badge">(full|as returned)</span> fetch_page', html)
    assert '<span class="badge">citation</span> fetch_page' in html
    assert '<span class="badge">compacted</span> fetch_page' in html
    episode = re.search(r'compaction before call \d+: <a href="#(ep_[0-9a-z_]+)">', html)
    assert episode is not None and f'id="{episode.group(1)}"' in html
    assert "Σ cost" in html and "claude-sonnet-4-6" in html and re.search(r"\$0\.\d+", html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html  # the first showing, escaped
    child = get(url, "/calls", agent="researcher.tides").text
    assert "Sub-agent of" in child and "<b>shared</b>" in child and 'href="/items?agent=researcher"' in child
    assert re.search(r'<span class="badge">(full|as returned)</span> fetch_page', child)


def test_agents_page_shows_sub_agents_and_scopes(served: tuple[str, dict], memory_root: Path) -> None:
    url, _ = served
    html = get(url, "/agents").text
    for child, scope in (("researcher.tides", "shared"), ("researcher.bridge", "isolated")):
        row = re.search(rf'<code>{re.escape(child)}</code></a>.*?</tr>', html, re.S)
        assert row is not None, child
        assert "<code>researcher</code>" in row.group(0) and f"scope-{scope}" in row.group(0)
        assert "spawn record" in row.group(0)
    scopes = {s.agent_id: s for s in agent_scopes(open_backend(str(memory_root)))}
    assert scopes["researcher"].parent_id is None and scopes["researcher"].scope == "own"
    assert scopes["researcher.tides"].memory_id == "researcher"
    assert scopes["researcher.bridge"].fork_items is not None and scopes["researcher.bridge"].fork_items >= 3


def test_report_page_shows_tables_and_plots(served: tuple[str, dict], report_dir: Path) -> None:
    url, _ = served
    html = get(url, "/report").text
    assert '<img src="/report/tokens.png"' in html and '<img src="/report/cost.png"' in html
    assert "full_once" in html and "claude-sonnet-4-6" in html
    # it opens on the report's verdict, then the table, then the plots: savings, tokens, cost
    verdict = html.index('class="verdict"')
    assert "against naive" in html[verdict:html.index("</p>", verdict)] and "**" not in html
    assert verdict < html.index('<table class="report"') < html.index("<img")
    assert (html.index('src="/report/savings.png"') < html.index('src="/report/tokens.png"')
            < html.index('src="/report/cost.png"'))
    plot = get(url, "/report/tokens.png")
    assert plot.status_code == 200 and plot.headers["content-type"] == "image/png"
    assert plot.content == (report_dir / "tokens.png").read_bytes()
    assert get(url, "/report/report.json").status_code == 404
    assert get(url, "/report/..%2Freport.json").status_code == 404
    assert get(url, "/static/style.css").headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_no_route_writes_and_nothing_is_written(served: tuple[str, dict], memory_root: Path) -> None:
    url, before = served
    for path in ("/", "/items", "/items/mem_000000000000", "/calls", "/agents", "/report", "/report/tokens.png"):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            answer = httpx.request(method, url.rstrip("/") + path, timeout=30)
            assert answer.status_code == 405, (method, path, answer.status_code)
    app_routes = Inspector(memory_root).app().routes
    for route in app_routes:
        assert set(getattr(route, "methods", None) or {"GET"}) <= {"GET", "HEAD"}, route
    # A foreign Host header (DNS rebinding) is refused.
    assert httpx.get(url, headers={"Host": "evil.example"}, timeout=30).status_code == 400
    # Every page above was served without writing a byte into the memory.
    for path in ("/items", "/calls", "/agents"):
        get(url, path)
    after = tree(memory_root)
    assert {name: after.get(name) for name in before} == before  # every file unchanged, none removed
    # New files: only SQLite's reader companions of the keyword index (shared memory and an empty
    # WAL, which any reader of a WAL database makes beside it); no data.
    assert all(re.search(r"lexical\.sqlite3-(shm|wal)$", name) for name in set(after) - set(before))


def test_read_only_backend_refuses_writes(memory_root: Path) -> None:
    memory = AgentMemory("researcher", backend=ReadOnlyBackend(open_backend(str(memory_root), read_only=True)))
    try:
        assert memory.read_only and len(memory.records()) >= 4
        with pytest.raises(StoreError, match="read-only"):
            memory.store("anything")
        with pytest.raises(StoreError, match="read-only"):
            memory.backend.claim("someone")
    finally:
        memory.close()


def test_a_port_in_use_is_refused_with_the_option_to_change_it(memory_root: Path) -> None:
    # the stand-in model listens on 8765: the inspector's default is another port, and a port
    # already taken says how to choose one
    from agent_memory.inspector.server import DEFAULT_PORT
    from agent_memory.testing.stand_in import STAND_IN_PORT

    assert DEFAULT_PORT != STAND_IN_PORT
    with InspectorServer(Inspector(memory_root), port=0) as taken:
        with pytest.raises(ConfigurationError, match=f"cannot listen on 127.0.0.1:{taken.port}.*--port"):
            InspectorServer(Inspector(memory_root), port=taken.port)


def test_non_loopback_bind_is_refused_unless_asked(memory_root: Path) -> None:
    for host in ("0.0.0.0", "192.168.1.20", "::", "example.org"):
        with pytest.raises(ConfigurationError, match="--allow-remote"):
            check_bind_host(host)
        with pytest.raises(ConfigurationError, match="--allow-remote"):
            InspectorServer(Inspector(memory_root), host=host, port=0)
    assert check_bind_host("0.0.0.0", allow_remote=True) == "0.0.0.0"
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert check_bind_host(host) == host
    result = CliRunner().invoke(app, ["inspect", str(memory_root), "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 1
    assert "not a loopback address" in result.output and "--allow-remote" in result.output
    missing = CliRunner().invoke(app, ["inspect", str(memory_root / "nowhere")])
    assert missing.exit_code == 1 and "no memory directory" in missing.output


# -- which agent opens, and an item's sha256 (issue 27, item 8) ---------------------------------------
def build_agents(root: Path) -> dict[str, list[str]]:
    """Three agents: ``aardvark`` (its only item forgotten: none left; first by name), ``moth`` (one
    item) and ``zulu`` (three). Returns each agent's item ids."""
    config = MemoryConfig(index_on_store=False)
    ids: dict[str, list[str]] = {}
    for agent_id, notes in (("aardvark", 1), ("moth", 1), ("zulu", 3)):
        with AgentMemory(agent_id, root, config=config) as memory:
            ids[agent_id] = [memory.store(f"{agent_id} note {n}: the ferry leaves at {7 + n} am.", type="custom",
                                          title=f"{agent_id} note {n}") for n in range(notes)]
            if agent_id == "aardvark":
                memory.forget(ids[agent_id].pop())
    return ids


def selected_agent(html: str) -> str | None:
    chosen = re.search(r'<option value="([^"]+)" selected>', html)
    return chosen.group(1) if chosen else None


def test_without_an_agent_the_one_with_the_most_items_opens(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    ids = build_agents(root)
    with InspectorServer(Inspector(root), port=0) as served:
        for path in ("/", "/items", "/calls"):
            page = get(served.url, path)
            assert page.status_code == 200 and selected_agent(page.text) == "zulu", path
        listing = get(served.url, "/").text
        assert all(f"/items/{item_id}" in listing for item_id in ids["zulu"])
        assert f"/items/{ids['moth'][0]}" not in listing
        assert selected_agent(get(served.url, "/items", agent="moth").text) == "moth"  # a page that names one
    with InspectorServer(Inspector(root, agent_id="moth"), port=0) as served:
        assert selected_agent(get(served.url, "/").text) == "moth"  # the one the inspector was started for


def test_item_page_shows_the_content_sha256(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    ids = build_agents(root)
    with AgentMemory("zulu", root, config=MemoryConfig(index_on_store=False)) as memory:
        digest = memory.get(ids["zulu"][1]).metadata.content_sha256
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    with InspectorServer(Inspector(root), port=0) as served:
        html = get(served.url, f"/items/{ids['zulu'][1]}", agent="zulu").text
    assert f"<tr><th>sha256</th><td><code>{digest}</code></td></tr>" in html


def test_inspect_command_without_agent_id_opens_the_agent_with_most_items(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    build_agents(root)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("AGENT_MEMORY_URL", None)
    command = subprocess.Popen([sys.executable, "-m", "agent_memory.cli", "inspect", str(root), "--port", "0",
                                "--price-model", "none"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert command.stderr is not None
        line = command.stderr.readline()  # "Inspecting <store> (read-only) at http://127.0.0.1:PORT/ (Ctrl-C ...)"
        found = re.search(r" at (http://127\.0\.0\.1:\d+/) ", line)
        assert found is not None, line
        page = None
        for _ in range(600):  # the line is printed as the server starts: wait until it answers
            try:
                page = httpx.get(found.group(1), timeout=60)
                break
            except httpx.ConnectError:
                assert command.poll() is None, "the inspect command ended"
                threading.Event().wait(0.1)
        assert page is not None and page.status_code == 200 and selected_agent(page.text) == "zulu"
    finally:
        command.terminate()
        command.wait(timeout=30)


# -- in a real browser -------------------------------------------------------------------------------
def _browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        missing.append(f"selenium ({exc})")
    if missing:
        message = f"no browser for the inspector test: {', '.join(missing)} missing (make venv installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager downloads nothing
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium-profile'}",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


def test_in_chromium_search_open_item_and_no_script_runs(served: tuple[str, dict], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as until
    from selenium.webdriver.support.ui import WebDriverWait

    url, _ = served
    driver = _browser(tmp_path, monkeypatch)
    try:
        driver.set_page_load_timeout(120)
        driver.get(url)
        assert "Items of researcher" in driver.find_element(By.TAG_NAME, "h1").text
        box = driver.find_element(By.NAME, "q")
        box.send_keys("where do herons nest")
        driver.find_element(By.ID, "search").click()
        wait = WebDriverWait(driver, 120)
        wait.until(until.url_contains("q=where"))
        wait.until(until.text_to_be_present_in_element((By.ID, "summary"), "hit(s) for"))
        links = driver.find_elements(By.CSS_SELECTOR, "a.item-link")
        assert links, "no hit"
        titles = driver.find_element(By.CSS_SELECTOR, "table.items tbody").text
        assert "example.org/herons" in titles
        assert f"note {PAYLOAD}" in titles  # the note's title shows as text
        assert driver.execute_script("return window.__pwned === undefined")
        driver.save_screenshot(str(tmp_path / "inspector-search.png"))
        heron = next(link for link in links if "web_content" in (row := link.find_element(By.XPATH, "./ancestor::tr")).text
                     and "example.org/herons" in row.text)
        heron.click()
        content = wait.until(until.presence_of_element_located((By.ID, "content"))).text
        assert "<script>alert(1)</script>" in content
        assert '<img src=x onerror="window.__pwned=1">' in content
        citation = driver.find_element(By.ID, "citation").text
        assert "example.org/herons" in citation and "retrieve_memory(id=" in citation
        assert driver.find_elements(By.TAG_NAME, "script") == []
        assert driver.find_elements(By.CSS_SELECTOR, "img[onerror]") == []
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text  # noqa: B018 - raises when no alert is open
        assert driver.execute_script("return typeof window.__pwned") == "undefined"
        shot = tmp_path / "inspector.png"
        driver.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        driver.get(url.rstrip("/") + "/calls?agent=researcher")
        assert wait.until(until.presence_of_all_elements_located((By.CSS_SELECTOR, "tr[id^=call-]")))
        assert driver.execute_script("return typeof window.__pwned") == "undefined"
        out = os.environ.get("AGENT_MEMORY_SCREENSHOTS")  # docs/inspector.png is made this way
        if out:
            driver.save_screenshot(str(Path(out) / "inspector-calls.png"))
            shutil.copy(tmp_path / "inspector-search.png", Path(out) / "inspector-search.png")
            shutil.copy(shot, Path(out) / "inspector-item.png")
    finally:
        driver.quit()


def test_postgres_store_is_inspected_the_same_way(postgres_server) -> None:  # type: ignore[no-untyped-def]
    url = postgres_server.new_database("inspected")
    with FakeLLMServer() as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        with MemoryAgent(model, tools=[fetch_page], agent_id="researcher", backend=url,
                         config=AgentConfig(allow_sub_agents=True)) as agent:
            server.enqueue(call("fetch_page", url="https://example.org/herons"), "In heronries.")
            agent.run("Where do herons nest?")
            server.enqueue(call("fetch_page", url="https://example.org/bridge"), "At nine.")
            agent.spawn("Check the bridge's hours.", memory="shared", agent_id="researcher.bridge")
    inspector = Inspector(url, agent_id="researcher", price_model=PriceModel.lookup("gpt-4o"))
    with InspectorServer(inspector, port=0) as served:
        item_id = _heron_id(served.url)
        html = get(served.url, f"/items/{item_id}").text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html
        calls = get(served.url, "/calls").text
        assert len(re.findall(r'<tr id="call-\d+">', calls)) == 2 and "gpt-4o" in calls
        agents = get(served.url, "/agents").text
        row = re.search(r'<code>researcher\.bridge</code></a>.*?</tr>', agents, re.S)
        assert row is not None and "scope-shared" in row.group(0) and "<code>researcher</code>" in row.group(0)
        child = get(served.url, "/calls", agent="researcher.bridge").text
        assert '<b>shared</b>' in child and len(re.findall(r'<tr id="call-\d+">', child)) == 2


def test_read_only_backend_reads_the_traces_and_refuses_to_write_them(memory_root: Path) -> None:
    """The traces of a read-only backend are its read-only logs (no wrapper of their own): read as
    written, a write refused with nothing changed on disk."""
    from agent_memory.models.traces import RawTraceItem
    from agent_memory.storage import common

    before = tree(memory_root)
    traces = common.traces(ReadOnlyBackend(open_backend(str(memory_root), read_only=True)), "researcher")
    assert traces.turn_ids() and traces.list_episodic()
    with pytest.raises(StoreError, match="read-only"):
        traces.add_raw([RawTraceItem(turn_id="turn_0099", seq=1, trace_type="user", content="x", source_event="t")])
    assert tree(memory_root) == before
