"""The search index's choke points, enumerated over the code: text reaches the index only as an
admitted doc (``search_table.admitted``: key values masked, credential content withheld), only
the index's own modules name its tables, and every leg end that writes the leg's final ledger
row hands the leg to the index. Each check is shown failing on a planted bypass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
INDEX_TABLES = ("search_doc", "search_fts")
# who may name the index's tables in SQL: its table, its reader, the migration that made it
NAMES_TABLES = {"orchestrator/ledger/search_table.py", "orchestrator/ledger/search.py",
                "orchestrator/ledger/migrations/versions/0006_search.py"}
# search_table's names that reach the table; who may import them
TABLE_NAMES = {"put", "TABLE", "Doc", "take_journaled", "NAME", "FTS", "create_fts"}
USES_TABLE = {"orchestrator/ledger/search_table.py", "orchestrator/ledger/search.py",
              "orchestrator/engine/index_sink.py", "orchestrator/operations/reindex.py",
              "orchestrator/ledger/outbox.py",
              "orchestrator/ledger/migrations/versions/0006_search.py"}


def sources() -> dict[str, str]:
    paths = [*ROOT.glob("orchestrator/**/*.py"), *ROOT.glob("plugins/**/*.py")]
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in sorted(paths)}


def index_bypasses(files: dict[str, str]) -> list[str]:
    """Each place outside the index's modules that names its tables or takes its writers."""
    found = []
    for rel, text in files.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and any(t in node.value.lower() for t in INDEX_TABLES) \
                    and rel not in NAMES_TABLES:
                found.append(f"{rel}:{node.lineno} names the index's table")
            if isinstance(node, ast.ImportFrom) and node.module == \
                    "orchestrator.ledger.search_table" and rel not in USES_TABLE:
                taken = {a.name for a in node.names} & TABLE_NAMES
                if taken:
                    found.append(f"{rel}:{node.lineno} imports {sorted(taken)}")
            if isinstance(node, ast.Attribute) and node.attr in TABLE_NAMES \
                    and isinstance(node.value, ast.Name) and node.value.id == "search_table" \
                    and rel not in USES_TABLE:
                found.append(f"{rel}:{node.lineno} uses search_table.{node.attr}")
    return found


def _calls(tree: ast.AST, owner: str, attr: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == attr
            and isinstance(n.func.value, ast.Name) and n.func.value.id == owner]


def leg_ends_unindexed(leg_source: str, wave_source: str) -> list[str]:
    """A leg's ledger write outside ``_ledger_row``, a ``_ledger_row`` that does not hand
    the leg to the index, or a wave that builds a leg without its index."""
    found = []
    tree = ast.parse(leg_source)
    row = next((n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)
                and n.name == "_ledger_row"), None)
    if row is None or not _calls(row, "self", "_indexed"):
        found.append("engine/leg.py: _ledger_row does not call self._indexed()")
    inside = {id(c) for c in _calls(row, "self", "ledger")} if row else set()
    for call in _calls(tree, "self", "ledger"):
        if id(call) not in inside:
            found.append(f"engine/leg.py:{call.lineno} writes a ledger row outside _ledger_row")
    for node in ast.walk(ast.parse(wave_source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "Leg" and "index" not in {k.arg for k in node.keywords}:
            found.append(f"engine/wave.py:{node.lineno} builds a Leg without index=")
    return found


def test_only_the_index_modules_reach_its_tables_and_a_planted_bypass_is_found():
    files = sources()
    assert index_bypasses(files) == []
    planted = {
        "plugins/sneaky.py": 'conn.exec_driver_sql("INSERT INTO search_doc (answer) VALUES (?)")',
        "orchestrator/ui/sneaky.py": "from orchestrator.ledger.search_table import put, Doc\n",
        "orchestrator/app/sneaky.py": "search_table.TABLE.insert()\n",
    }
    assert len(index_bypasses(planted)) == 3


def test_every_leg_end_is_handed_to_the_index_and_a_planted_bypass_is_found():
    leg = (ROOT / "orchestrator/engine/leg.py").read_text()
    wave = (ROOT / "orchestrator/engine/wave.py").read_text()
    assert leg_ends_unindexed(leg, wave) == []
    unhanded = leg.replace("            self._indexed()\n", "            pass\n")
    assert unhanded != leg and leg_ends_unindexed(unhanded, wave) == [
        "engine/leg.py: _ledger_row does not call self._indexed()"]
    side_door = leg + "\n\nclass X:\n    async def f(self):\n        await self.ledger({})\n"
    assert len(leg_ends_unindexed(side_door, wave)) == 1
    no_index = wave.replace("index=self._indexed if self.ledger else None", "")
    assert no_index != wave and len(leg_ends_unindexed(leg, no_index)) == 1


def test_the_index_takes_admitted_docs_only():
    from orchestrator.ledger.search_table import Doc, admitted, put
    from orchestrator.security.secrets import register

    with pytest.raises(TypeError, match="admitted"):
        Doc(wave_id="w", leg_id="w-1", run_id=None, kind="leg", model="p/m", status=None,
            tag=None, user=None, ts=None, prompt="", answer="sk-raw")
    engine = sa.create_engine("sqlite://")
    with engine.begin() as conn, pytest.raises(TypeError, match="admitted docs only"):
        put(conn, [{"wave_id": "w", "leg_id": "w-1", "answer": "raw"}])
    key = "sk-choke-test-0123456789abcdefghijklmnop"
    register(key, "$CHOKE_KEY")
    doc = admitted(wave_id="w", leg_id="w-1", kind="leg", model="p/m", prompt=f"why {key}",
                   answer=f"because {key}")
    assert (doc.prompt, doc.answer) == ("why ***", "because ***")
