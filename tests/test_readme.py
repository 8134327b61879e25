"""The README names only commands and options the CLI has: every `gquery ...` line of its code blocks
and of its commands table is read, and each subcommand and --option must exist (an option the code
dropped, left in the README, is how a user's first command fails). Its one-line errors, and its samples
that a machine without a GPU runs, are run (commands and the Python API's blocks): what they print,
times masked, is what it shows."""

import difflib
import re
import shlex
from pathlib import Path

import typer

from gquery.cli import app

README = Path(__file__).resolve().parent.parent / "README.md"


def command_lines() -> list[str]:
    """`gquery ...` as the README writes it: in code blocks (4-space indented, `$ ` or not) and in the
    commands table's first column."""
    lines = []
    for line in README.read_text().splitlines():
        code = re.match(r"^ {4}(?:\$ )?(gquery(?: .*)?)$", line)
        if code:
            lines.append(code[1].split("  #")[0].strip())
        for cell in re.findall(r"^\| `(gquery[^`]*)`", line):
            lines.append(cell.replace("\\|", "|"))
    return lines


def options_of() -> dict[str, set[str]]:
    group = typer.main.get_command(app)
    top = {o for p in group.params for o in p.opts}
    return {name: {o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", []))} | top | {"--help"}
            for name, cmd in group.commands.items()} | {"": top | {"--help"}}


def test_the_readme_names_commands_at_all():
    assert len(command_lines()) > 20


def unknown(lines: list[str]) -> list[tuple[str, str]]:
    """(line, the subcommand or --option of it the CLI does not have)."""
    options = options_of()
    wrong = []
    for line in lines:
        try:
            words = shlex.split(line)
        except ValueError:  # a table cell's pseudo-syntax with an unbalanced quote: its words still count
            words = line.split()
        sub = words[1] if len(words) > 1 and not words[1].startswith("-") else ""
        if sub and sub not in options:
            wrong.append((line, sub))
            continue
        for word in words:
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", word):
                if flag not in options[sub]:
                    wrong.append((line, flag))
    return wrong


def test_every_command_and_option_the_readme_names_exists():
    assert unknown(command_lines()) == []


def test_the_check_finds_what_the_cli_lacks():
    assert unknown(["gquery run --sf 1 [--encoding sliced|all]", "gquery nosuchcommand --x", "gquery --version"]) == \
        [("gquery run --sf 1 [--encoding sliced|all]", "--encoding"), ("gquery nosuchcommand --x", "nosuchcommand")]


def samples() -> list[tuple[str, list[str]]]:
    """(command, the lines the README shows it printing) for each `$ gquery ...` of its code blocks."""
    out, lines = [], README.read_text().splitlines()
    for k, line in enumerate(lines):
        if line.startswith("    $ gquery "):
            shown = []
            for after in lines[k + 1:]:
                if not after.startswith("    ") or after.startswith("    $ "):
                    break
                shown.append(after[4:])
            out.append((line[6:], shown))
    return out


def test_the_readmes_one_line_errors_are_what_the_cli_prints(tmp_path):
    """Each sample whose whole output is one `gquery: error:` line, run over a small parquet file of the
    name it reads: the line is the code's, to the character (timed samples are the GPU host's)."""
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    errors = [(c, s) for c, s in samples() if len(s) == 1 and s[0].startswith("gquery: error:")]
    assert errors, "the README shows no one-line error"
    for command, shown in errors:
        words = shlex.split(command)
        for w in words:
            if w.endswith(".parquet"):
                pq.write_table(pa.table({"city": ["Oslo"], "km": pa.array([3], pa.int32())}), tmp_path / w)
        r = subprocess.run([sys.executable, "-m", "gquery", *words[1:]], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
        assert (r.stdout + r.stderr).splitlines() == shown, command


# --- the samples that run without a GPU, run -----------------------------------------------------------------
RUNNABLE = ("gquery run --sf 0.01 ", "gquery generate --sf 0.03 --parts 3", "gquery run --sf 0.05 --z 30 --backend duckdb",
            "gquery run --sf 1 --z 30 --backend cpu")  # the rest: a GPU's, Dask's, or a run stopped by Ctrl-C
TIMED = re.compile(r"(\d[\d,]*(?:\.\d+)?) (ms|s)\b")
# progress said every few seconds of generating or encoding: as many lines as the machine is slow
PROGRESS = re.compile(r"^(encoding \S+: \d+ of \d+ columns done, \S+ next|generating: [\d.]+ GB written of about [\d.]+ GB)$")


def normalized(lines: list[str]) -> list[str]:
    """Lines with what changes from run to run masked: times (`9.82 ms`, `in 7.9 s`), ratios against DuckDB,
    and every figure of a timings table; runs of spaces and of a table's rules collapsed (a wider figure
    widens its column)."""
    out, timings = [], False
    for line in lines:
        timings = timings or line.startswith("runs (medians")
        line = TIMED.sub(r"<t> \2", line)
        line = re.sub(r"\b\d+\.\d+x\b", "<r>x", line)
        line = re.sub(r"tcp://[\d.:]+", "<address>", line)
        if timings:  # a loaded machine's run past a second prints 1,234.567
            line = re.sub(r"\d[\d,]*\.\d+", "<t>", line)
        line = re.sub(r"━+", "━", re.sub(r"─+", "─", re.sub(r" +", " ", line)))
        out.append(line.rstrip())
    return out


def shown_matches(shown: list[str], printed: list[str]) -> bool:
    """The README's lines are the printed ones, in order; its `...` stands for any lines."""
    if not shown:
        return not printed
    if shown[0] == "...":
        return any(shown_matches(shown[1:], printed[k:]) for k in range(len(printed) + 1))
    return bool(printed) and shown[0] == printed[0] and shown_matches(shown[1:], printed[1:])


def test_the_readmes_samples_that_need_no_gpu_print_what_it_shows(tmp_path):
    """Each `$ gquery ...` sample a machine without a GPU can run (TPC-H generated here, in order, in one
    folder), run: its output, times masked, is the README's."""
    import os
    import subprocess
    import sys

    from gquery.gpu.device import probe

    if probe()[0] is not None:
        import pytest

        pytest.skip("these samples show a machine without a GPU")
    env = {k: v for k, v in os.environ.items() if k not in ("GQUERY_DATA_DIR", "GQUERY_STORE_DIR")}
    ran = 0
    for command, shown in samples():
        if not command.startswith(RUNNABLE):
            continue
        words = shlex.split(command)
        if "--sf" in words and words[words.index("--sf") + 1] == "0.05":  # the store the stopped run resumed
            subprocess.run([sys.executable, "-m", "gquery", "generate", "--sf", "0.05", "--parts", "5", "--keep-parquet"], cwd=tmp_path,
                           env=env, capture_output=True, timeout=300, check=True)
        r = subprocess.run([sys.executable, "-m", "gquery", *words[1:]], cwd=tmp_path, env=env, text=True,
                           capture_output=True, timeout=600)
        # the notes on stderr come before the answer on stdout, as a terminal shows them (read apart: a
        # pipe's two writers would interleave part lines)
        printed = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip() and not PROGRESS.match(ln)]
        assert r.returncode == 0, (command, r.stderr[-2000:])
        want, got = normalized([s for s in shown if s.strip()]), normalized(printed)
        assert shown_matches(want, got), f"{command}\n" + "\n".join(difflib.unified_diff(want, got, lineterm="", n=1))
        ran += 1
    assert ran == 5


def python_block(after: str) -> list[str]:
    """The statements of the first indented code block after the README's line `after` (comments dropped)."""
    lines = README.read_text().splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith(after))
    while not lines[k].startswith("    "):
        k += 1
    block = []
    while k < len(lines) and lines[k].startswith("    "):
        block.append(re.sub(r"\s+#(?![^\"']*[\"'][^\"']*$).*$", "", lines[k][4:]).rstrip())
        k += 1
    return [ln for ln in block if ln]


def test_the_readmes_python_runs_without_a_gpu(sf001, tmp_path, monkeypatch, capsys):
    """The Python API's block and the DB-API's, statement by statement, over SF 0.01's parquet (the README's
    path is SF 10's store) and a trips.parquet of its columns: each runs, but for what needs a GPU or a
    library not installed; `print(a)` prints the README's sample, its time masked."""
    import importlib.util

    import pyarrow as pa
    import pyarrow.parquet as pq

    from gquery.gpu.device import probe

    if probe()[0] is not None:
        import pytest

        pytest.skip("the samples show a machine without a GPU")
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"city": ["Oslo", "Rome", "Oslo"], "fare": pa.array([12, 30, 7], pa.int64()),
                             "km": pa.array([3, 12, 2], pa.int32())}), tmp_path / "trips.parquet")
    namespace = {"text": "SELECT COUNT(*), SUM(l_quantity) FROM lineitem WHERE l_suppkey < 30"}
    needs = {'backend="gpu"': probe()[0] is not None, "a.profile": probe()[0] is not None,
             "a.df()": importlib.util.find_spec("pandas") is not None and importlib.util.find_spec("polars") is not None}
    ran = 0
    for statement in python_block("## The Python API") + python_block("A PEP 249 connection"):
        if any(word in statement and not present for word, present in needs.items()):
            continue
        statement = statement.replace("dbgen_data/sf10/lineitem.gq", str(sf001.files[0]))
        capsys.readouterr()
        exec(statement, namespace)  # noqa: S102 (the README's own code)
        if statement == "print(a)":
            printed = capsys.readouterr().out.splitlines()
            shown = python_block("`print(a)` on the CPU machine")
            assert normalized(printed) == normalized(shown)
        ran += 1
    assert ran >= 16


def test_the_readmes_explain_listing_is_what_the_planner_prints(data_dir):
    """"Three scans": the plan of the mission at Z = 30 over SF 1 as generated, the key's lists and top bytes
    read, printed as the README shows it; and at Z = 1,000 the phrases its next paragraph quotes."""
    from gquery import answer, sql, store, tpch
    from gquery.gpu.fusedplan import plan_fused

    table = store.open_store(store.ensure_store(tpch.generate(1, data_dir, echo=lambda m: None), echo=lambda m: None))
    key = table.columns["l_suppkey"]
    key.get("indexed"), key.get("sliced")

    def described(z: int) -> str:
        query = sql.parse(sql.named_sql("mission", z), answer.schema_of(table))
        return plan_fused(query, [table], "pinned", 132).choose().describe()

    want = python_block("`--explain` names the choice")
    got = described(30).splitlines()
    assert got == want, "\n".join(difflib.unified_diff(want, got, lineterm="", n=1))
    lines = README.read_text().splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("At Z = 1,000 the same plan"))
    paragraph = " ".join(lines[k:lines.index("", k)])
    quoted = re.findall(r"`([^`]+)`", paragraph)
    shown = " ".join(described(1000).split())
    assert len(quoted) == 3 and all(" ".join(q.split()) in shown for q in quoted), (quoted, shown)
