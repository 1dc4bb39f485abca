"""Hostile inputs for every loader and command, and a runner that says how each one ended.

One seed gives one case (deterministic), so the suite (``tests/fuzz/test_hostile.py``, a few
hundred derandomized hypothesis examples) and the long run (``bench/fuzz_hostile.py``, 10,000 per
command) draw from the same generator. A case is a set of files plus the command to run on them;
the runner calls the CLI entry point in-process and classifies the outcome:

- ``crash``: an exception escaped ``main``, the exit code is 3 (an internal error), a traceback was
  printed, or ``--format json`` printed something that is not one complete JSON document;
- ``disagree``: validate's verdict on a trace file differs from what the command did with it
  (valid but the command failed, or invalid but it succeeded);
- ``store``: an ingest that failed changed the store.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

SEEDS = Path(__file__).parent / "seeds"
HOLE = "\x00HOLE{}\x00"

# ---------------------------------------------------------------- hostile values (raw JSON text)


def _deep(depth: int, rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def hostile_value(rng: random.Random) -> bytes:
    """Raw JSON text of a value a well-behaved producer would not write at a given place."""
    k = rng.randrange(24)
    if k == 0:
        return _deep(rng.choice([40, 120, 260, 1100, 5000]), rng)
    if k == 1:
        return str(rng.choice([2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**62 + 7, 2**53 + 1])).encode()
    if k == 2:
        return str(-rng.choice([2**63, 2**63 + 1, 2**64, 10**30])).encode()
    if k == 3:
        return ("-" if rng.random() < 0.5 else "").encode() + b"1" + b"0" * rng.choice([25, 400])
    if k == 4:
        return rng.choice([b"1e308", b"1.7976931348623157e308", b"-1e308", b"5e-324", b"-0.0", b"1e-400"])
    if k == 5:
        return rng.choice([b"null", b"true", b"false", b"0", b"-1", b'""', b"[]", b"{}"])
    if k == 6:
        return rng.choice([b'"abc"', b'"12"', b'"1e3"', b'"2026-13-45T99:99:99Z"', b'"\\u0000"'])
    if k == 7:
        return rng.choice([b"[1,2,3]", b'["a",null]', b"[[]]", b'[{"x":1}]', b"[null]"])
    if k == 8:
        return b'"' + b"x" * rng.choice([1000, 70_000]) + b'"'
    if k == 9:
        return rng.choice([b'"\\ud800"', b'"\\udfff\\ud800"', b'"\xff\xfe"', b'"\\u202e\\u200b"'])
    if k == 10:
        return rng.choice([b"NaN", b"Infinity", b"-Infinity", b"01", b"1.", b".5", b"+1", b"0x10"])
    if k == 11:
        return b"[" + b",".join([str(2**62 + rng.randrange(100)).encode()] * 8) + b"]"
    return rng.choice(
        [b"1", b"2.5", b'"s"', b"0", b"true", b'{"k":"v"}', b'{"k":{"k":[1,{"k":2}]}}', b"1e20", b"-5"]
    )


# ---------------------------------------------------------------- tree mutation


def _pointers(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_pointers(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_pointers(v, (*prefix, i)))
    return out


def mutate_tree(obj: Any, rng: random.Random, hot: list[tuple[Any, ...]] = ()) -> bytes:
    """JSON text of ``obj`` with one to three values replaced by hostile raw text (or keys removed)."""
    obj = orjson.loads(orjson.dumps(obj))
    holes: dict[str, bytes] = {}
    for n in range(rng.randint(1, 3)):
        ptrs = _pointers(obj)
        ptr = rng.choice(list(hot)) if hot and rng.random() < 0.5 else rng.choice(ptrs)
        parent = obj
        try:
            for p in ptr[:-1]:
                parent = parent[p]
        except (KeyError, IndexError, TypeError):
            continue
        if not ptr:  # the whole document
            return hostile_value(rng)
        last = ptr[-1]
        if isinstance(parent, dict) and rng.random() < 0.15:
            parent.pop(last, None)
            continue
        if isinstance(parent, dict) and rng.random() < 0.1:  # a new unknown key
            last = rng.choice(["zz", "", "rec", "events", "type", "\u0000"])
        try:
            hole = HOLE.format(n)
            if isinstance(parent, list) and not isinstance(last, int):
                continue
            if isinstance(parent, list) and last >= len(parent):
                continue
            if not isinstance(parent, dict | list):
                continue
            parent[last] = hole
            holes[hole] = hostile_value(rng)
        except (TypeError, IndexError):
            continue
    text = orjson.dumps(obj)
    for hole, raw in holes.items():
        text = text.replace(orjson.dumps(hole), raw)
    return text


def mutate_text(data: bytes, rng: random.Random) -> bytes:
    """Byte-level damage: BOMs, truncation, flipped bytes, a duplicated key, trailing garbage."""
    k = rng.randrange(9)
    if k == 0:
        return b"\xef\xbb\xbf" * rng.randint(1, 2) + data
    if k == 1 and data:
        return data[: rng.randrange(len(data))]
    if k == 2 and data:
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if k == 3:
        i = data.find(b"{")
        if i >= 0:
            j = data.find(b'"', i)
            end = data.find(b'"', j + 1)
            if j >= 0 and end > j:
                key = data[j : end + 1]
                return data[: i + 1] + key + b":1," + data[i + 1 :]
    if k == 4:
        return data + rng.choice([b"x", b"{}", b"\n{", b"\x00", b"]"])
    if k == 5:
        return rng.choice([b"", b"   \n", b"null", b"[]", b"0", b'"s"', b"[1,2]", b"\xef\xbb\xbf"])
    return data


def compress(data: bytes, rng: random.Random) -> bytes:
    """gzip, sometimes damaged (flipped bytes in the deflate stream, cut, bad checksum)."""
    z = gzip.compress(data, mtime=0)
    k = rng.randrange(5)
    if k == 0 and len(z) > 20:
        b = bytearray(z)
        b[rng.randrange(10, len(b))] ^= 0xFF
        return bytes(b)
    if k == 1:
        return z[: rng.randrange(len(z))]
    if k == 2:
        return z[:-8] + b"\x00" * 8
    return z


# ---------------------------------------------------------------- cases


@dataclass
class Case:
    """Files to write (relative path -> bytes) and the main input among them."""

    kind: str
    files: dict[str, bytes]
    main: str
    importer: str | None = None
    notes: list[str] = field(default_factory=list)
    seed: int = 0


_TRACE_CACHE: dict[str, Any] = {}


def seed_trace() -> dict[str, Any]:
    if "t" not in _TRACE_CACHE:
        from orchestrace.core.io import dumps
        from orchestrace.gen import generate

        _TRACE_CACHE["t"] = orjson.loads(dumps(generate(seed=7, size=12)))
    return _TRACE_CACHE["t"]


def _hot(tr: dict[str, Any]) -> list[tuple[Any, ...]]:
    n = len(tr["events"])
    hot: list[tuple[Any, ...]] = [("events",), ("edges",), ("metadata",), ("costs", "tokens"), ("rewards",)]
    for i in range(n):
        for k in ("tokens_in", "tokens_out", "attrs", "content", "type", "t", "id", "agent", "turn"):
            hot.append(("events", i, k))
        hot.append(("events", i))
    hot += [("events", 0, "attrs", "x"), ("metadata", "m"), ("rewards", "team")]
    return hot


def _log_lines(tr: dict[str, Any]) -> list[dict[str, Any]]:
    head = {"rec": "header", **{k: v for k, v in tr.items() if k not in ("events", "edges")}}
    return [
        head,
        *({"rec": "event", **e} for e in tr["events"]),
        *({"rec": "edge", **x} for x in tr["edges"]),
    ]


def trace_case(rng: random.Random) -> Case:
    """A damaged trace file: .json, .jsonl or .events.jsonl, maybe gzip'd."""
    tr = seed_trace()
    fmt = rng.choice(["json", "jsonl", "events.jsonl"])
    clean = rng.random() < 0.08  # some untouched files keep the 'valid' side of the checks honest
    if fmt == "events.jsonl":
        recs = _log_lines(tr)
        lines = [orjson.dumps(r) for r in recs]
        if not clean:
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(lines))
                if rng.random() < 0.7:
                    lines[i] = mutate_tree(recs[i], rng, [("type",), ("rec",), ("tokens_in",), ("attrs",)])
                else:
                    lines[i] = mutate_text(lines[i], rng)
        data = b"\n".join(lines) + b"\n"
    elif fmt == "jsonl":
        # distinct trace ids: the same id twice with different content is a store conflict (OT310)
        copies = [{**tr, "trace_id": f"{tr['trace_id']}-{k}"} for k in range(rng.randint(1, 3))]
        docs = [orjson.dumps(c) if clean else mutate_tree(c, rng, _hot(c)) for c in copies]
        data = b"\n".join(docs) + b"\n"
    else:
        data = orjson.dumps(tr) if clean else mutate_tree(tr, rng, _hot(tr))
    if not clean and rng.random() < 0.25:
        data = mutate_text(data, rng)
    name = f"t.{fmt}"
    if rng.random() < 0.2:
        data, name = compress(data, rng), name + ".gz"
    return Case("trace", {name: data}, name, notes=["clean"] if clean else [])


def _opencode_files() -> dict[str, Any]:
    t = 1_750_000_000_000
    return {
        "storage/session/p/ses_a.json": {"id": "ses_a", "projectID": "p", "time": {"created": t}},
        "storage/message/ses_a/msg_1.json": {"id": "msg_1", "sessionID": "ses_a", "role": "user", "time": {"created": t}},
        "storage/part/msg_1/prt_1.json": {"id": "prt_1", "messageID": "msg_1", "type": "text", "text": "audit"},
        "storage/message/ses_a/msg_2.json": {
            "id": "msg_2", "sessionID": "ses_a", "role": "assistant",
            "time": {"created": t + 1000, "completed": t + 9000},
            "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 20, "write": 0}},
        },
        "storage/part/msg_2/prt_2.json": {
            "id": "prt_2", "messageID": "msg_2", "type": "tool", "tool": "bash", "callID": "c1",
            "state": {"status": "completed", "input": {"cmd": "ls"}, "output": "ok", "time": {"start": t + 1500, "end": t + 8000}},
        },
    }  # fmt: skip


def _otel_doc() -> dict[str, Any]:
    def attr(k: str, v: Any) -> dict[str, Any]:
        key = "intValue" if isinstance(v, int) else "stringValue"
        return {"key": k, "value": {key: str(v) if key == "intValue" else v}}

    spans = [
        {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "invoke_agent lead",
         "startTimeUnixNano": "1750000000000000000", "endTimeUnixNano": "1750000009000000000",
         "attributes": [attr("gen_ai.operation.name", "invoke_agent"), attr("gen_ai.agent.name", "lead")]},
        {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "00f067aa0ba902b7", "parentSpanId": "b7ad6b7169203331",
         "name": "chat gpt", "startTimeUnixNano": "1750000001000000000", "endTimeUnixNano": "1750000002000000000",
         "attributes": [attr("gen_ai.operation.name", "chat"), attr("gen_ai.usage.input_tokens", 12),
                        attr("gen_ai.usage.output_tokens", 3), attr("gen_ai.request.model", "m")]},
        {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "00f067aa0ba902b8", "parentSpanId": "b7ad6b7169203331",
         "name": "execute_tool search", "startTimeUnixNano": "1750000003000000000", "endTimeUnixNano": "1750000004000000000",
         "attributes": [attr("gen_ai.operation.name", "execute_tool"), attr("gen_ai.tool.name", "search")]},
    ]  # fmt: skip
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}


def _agents_doc() -> dict[str, Any]:
    t = "2026-01-01T00:00:{:02d}+00:00"

    def span(i: str, parent: str | None, a: int, b: int, data: dict[str, Any]) -> dict[str, Any]:
        return {"object": "trace.span", "id": i, "trace_id": "trace_1", "parent_id": parent,
                "started_at": t.format(a), "ended_at": t.format(b), "span_data": data, "error": None}  # fmt: skip

    return {
        "data": [
            {"object": "trace", "id": "trace_1", "workflow_name": "w", "group_id": None, "metadata": None},
            span("s1", None, 0, 9, {"type": "agent", "name": "lead"}),
            span("s2", "s1", 1, 2, {"type": "generation", "model": "m", "usage": {"input_tokens": 10, "output_tokens": 4}}),
            span("s3", "s1", 2, 7, {"type": "function", "name": "searcher", "input": "{}", "output": "ok"}),
            span("s4", "s3", 3, 6, {"type": "agent", "name": "searcher"}),
        ]
    }  # fmt: skip


IMPORTERS = (
    "claude-code",
    "codex",
    "gemini-cli",
    "opencode",
    "otel",
    "openai-agents",
    "who-and-when",
    "chatdev",
)


def importer_case(rng: random.Random, fmt: str) -> Case:
    """A foreign log of format ``fmt`` with wrong shapes or wrong field types inside."""
    if fmt == "opencode":
        files = _opencode_files()
        victim = rng.choice(list(files))
        out = {k: orjson.dumps(v) for k, v in files.items()}
        out[victim] = mutate_tree(files[victim], rng) if rng.random() < 0.8 else mutate_text(out[victim], rng)
        return Case(fmt, out, "storage/session/p/ses_a.json", importer=fmt)
    if fmt == "chatdev":
        lines = (SEEDS / "chatdev.log").read_bytes().splitlines()
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(lines))
            lines[i] = rng.choice(
                [
                    b"[2023-13-45 99:99:99 INFO] **[Preprocessing]**",
                    b"[2023-25-08 09:35:59 INFO] Programmer: **Programmer<->Chief Technology Officer on : Coding, turn 99999999999999999999999**",
                    b"**[OpenAI_Usage_Info Receive]**\nprompt_tokens: 99999999999999999999999\ncompletion_tokens: -5\ntotal_tokens: abc",
                    b"\xff\xfe\x00garbage",
                    b"[2023-00-00 00:00:00 INFO] ",
                    b"[2023-25-08 09:40:37 INFO] **[Post Info]**\n\n**cost**=$"
                    + rng.choice([b"1.2.3", b"9" * 400, b"0.25", b"-", b"."])
                    + b"\n\n**duration**=12.5s",
                    b"",
                    lines[i][: len(lines[i]) // 2],
                ]
            )
        return Case(fmt, {"x.log": b"\n".join(lines) + b"\n"}, "x.log", importer=fmt)
    if fmt in ("claude-code", "codex"):
        recs = [orjson.loads(x) for x in (SEEDS / f"{fmt}.jsonl").read_bytes().splitlines() if x.strip()]
        lines = [orjson.dumps(r) for r in recs]
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(lines))
            lines[i] = mutate_tree(recs[i], rng) if rng.random() < 0.8 else mutate_text(lines[i], rng)
        data = b"\n".join(lines) + b"\n"
        if rng.random() < 0.1:
            data = mutate_text(data, rng)
        files = {"x.jsonl": data}
        if fmt == "claude-code" and rng.random() < 0.3:  # a sub-agent log and its .meta.json
            sub = [orjson.dumps({**r, "isSidechain": True}) for r in recs[:4]]
            sub[rng.randrange(len(sub))] = hostile_value(rng)
            files["x/subagents/agent-a1.jsonl"] = b"\n".join(sub) + b"\n"
            meta = {"agentType": "researcher", "description": "look it up"}
            files["x/subagents/agent-a1.meta.json"] = (
                mutate_tree(meta, rng) if rng.random() < 0.8 else hostile_value(rng)
            )
        return Case(fmt, files, "x.jsonl", importer=fmt)
    doc = {
        "gemini-cli": lambda: orjson.loads((SEEDS / "gemini-cli.json").read_bytes()),
        "who-and-when": lambda: orjson.loads((SEEDS / "who-and-when.json").read_bytes()),
        "otel": _otel_doc,
        "openai-agents": _agents_doc,
    }[fmt]()
    data = mutate_tree(doc, rng)
    if rng.random() < 0.2:
        data = mutate_text(data, rng)
    return Case(fmt, {"x.json": data}, "x.json", importer=fmt)


# ---------------------------------------------------------------- running


@dataclass
class Outcome:
    code: int | None
    problem: str | None  # crash / disagree / store description, None when fine
    stdout: bytes = b""
    stderr: str = ""


def write_case(case: Case, root: Path) -> Path:
    for rel, data in case.files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root / case.main


def run_cli(argv: list[str]) -> tuple[int | None, bytes, str, BaseException | None]:
    """``orchestrace ARGV`` in-process: (exit code, stdout bytes, stderr text, escaped exception)."""
    from typer.testing import CliRunner

    from orchestrace.cli import main

    runner = CliRunner()
    code: int | None = 0
    exc: BaseException | None = None
    with runner.isolation() as (out, err, *_):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException as e:  # noqa: BLE001 - the point: nothing may escape
            exc, code = e, None
        sys.stdout.flush()  # text written through sys.stdout (csv) is buffered
        stdout, stderr = out.getvalue(), err.getvalue() if err is not None else b""
    return code, stdout, stderr.decode("utf-8", "replace"), exc


def _crash(code: int | None, stderr: str, exc: BaseException | None) -> str | None:
    if exc is not None:
        return f"uncaught {type(exc).__name__}: {str(exc)[:200]}"
    if code == 3:
        return f"internal error: {stderr.strip()[:300]}"
    if "Traceback" in stderr:
        return f"traceback: {stderr[-300:]}"
    if code not in (0, 1, 2):
        return f"exit code {code}"
    return None


def validate_verdict(path: Path) -> bool:
    from orchestrace.core.validate import validate_path

    return validate_path(path).valid


def _store_rows(store: Path) -> list[tuple[Any, ...]]:
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        return con.execute("SELECT trace_id, digest FROM traces ORDER BY trace_id").fetchall()
    finally:
        con.close()


def good_trace_file(root: Path) -> Path:
    p = root / "good.json"
    if not p.exists():
        p.write_bytes(orjson.dumps(seed_trace()))
    return p


Check = Callable[[Case, Path, Path], Outcome]


def _main_input_check(
    argv_of: Callable[[Path, Path], list[str]],
    *,
    agree: bool = True,
    json_out: bool = False,
    first_only: bool = False,
    output: str | None = None,
    refusal: str | None = None,
) -> Check:
    """A command on the main input: no crash; exit 0 exactly when validate says valid.
    ``first_only``: the command reads the first trace of a file only (view), so a later
    invalid trace of a .jsonl is none of its business. ``output``: the file the command
    writes under the work folder, which must not exist after a failure. ``refusal``: the code of
    the one error a valid trace may get (a value the target format cannot hold)."""

    def check(case: Case, main: Path, work: Path) -> Outcome:
        code, out, err, exc = run_cli(argv_of(main, work))
        problem = _crash(code, err, exc)
        if problem is None and output is not None and code != 0 and (work / output).exists():
            problem = f"partial output: exit {code} left {output}"
        if problem is None and json_out:
            try:
                json.loads(out)
            except ValueError:
                problem = f"--format json printed no complete JSON document ({len(out)} bytes)"
        single = not case.main.endswith((".jsonl", ".jsonl.gz")) or case.main.endswith(".events.jsonl")
        if problem is None and agree and case.kind == "trace" and (single or not first_only):
            valid = validate_verdict(main)
            if valid and code != 0 and not (refusal and code == 1 and refusal in err):
                problem = f"disagree: validate says valid, command exit {code}: {err.strip()[:300]}"
            elif not valid and code == 0:
                problem = "disagree: validate says invalid, command exit 0"
        return Outcome(code, problem, out, err)

    return check


def _validate_multi(case: Case, main: Path, work: Path) -> Outcome:
    """validate --format json on the bad file between two good ones: one entry per file."""
    good = good_trace_file(work)
    code, out, err, exc = run_cli(["validate", "--format", "json", str(good), str(main), str(good)])
    problem = _crash(code, err, exc)
    if problem is None:
        try:
            doc = json.loads(out)
            if not (isinstance(doc, list) and len(doc) == 3 and doc[0]["valid"] and doc[2]["valid"]):
                problem = f"validate --format json: expected 3 entries (good, ?, good), got {str(doc)[:200]}"
        except (ValueError, KeyError, TypeError):
            problem = f"validate --format json printed no complete JSON document ({len(out)} bytes)"
    return Outcome(code, problem, out, err)


def _report_multi(argv: list[str]) -> Check:
    """stats/analyze --format json on the bad file between two good ones: the good files are
    still counted, the output is one complete JSON document, the exit code is validate's."""

    def check(case: Case, main: Path, work: Path) -> Outcome:
        good = good_trace_file(work)
        other = work / "good2.json"  # another id: analyze measures a repeated trace once
        other.write_bytes(orjson.dumps({**seed_trace(), "trace_id": "good-2"}))
        code, out, err, exc = run_cli([*argv, str(good), str(main), str(other)])
        problem = _crash(code, err, exc)
        if problem is None:
            try:
                doc = json.loads(out)
                ids = [r["trace_id"] for r in doc["traces"]]
            except (ValueError, KeyError, TypeError):
                return Outcome(code, f"--format json printed no complete JSON document ({len(out)} bytes)")
            good_id = seed_trace()["trace_id"]
            valid = validate_verdict(main)
            if (code == 0) != valid:
                problem = f"disagree: validate valid={valid}, exit {code}: {err.strip()[:300]}"
            elif ids[:1] != [good_id] or ids[-1:] != ["good-2"] or (not valid and len(ids) != 2):
                problem = f"multi-file: the good files were not both counted: {ids[:6]}"
        return Outcome(code, problem, out, err)

    return check


def _load_agrees(case: Case, main: Path, work: Path) -> Outcome:
    """The library: load() succeeds exactly when validate_path() says valid."""
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.core.io import load

    valid = validate_verdict(main)
    try:
        load(main)
        ok, why = True, ""
    except OrchestraceError as e:
        ok, why = False, str(e)
    except Exception as e:  # noqa: BLE001
        return Outcome(None, f"uncaught {type(e).__name__} in load: {str(e)[:200]}")
    if ok != valid:
        return Outcome(0 if ok else 1, f"disagree: validate valid={valid}, load ok={ok} {why[:200]}")
    return Outcome(0 if ok else 1, None)


_STORE_TEMPLATE: dict[str, Path] = {}


def _ingest(case: Case, main: Path, work: Path) -> Outcome:
    """ingest --on-error abort into a store holding one trace: exit 0 iff valid; a failure
    leaves the store unchanged."""
    store = _store(work)
    before = _store_rows(store)
    code, out, err, exc = run_cli(["ingest", str(main), "-s", str(store), "-q", "--on-error", "abort"])
    problem = _crash(code, err, exc)
    if problem is None:
        valid = validate_verdict(main)
        if valid and code != 0:
            problem = f"disagree: validate says valid, ingest exit {code}: {err.strip()[:300]}"
        elif not valid and code == 0:
            problem = "disagree: validate says invalid, ingest exit 0"
        elif not valid and _store_rows(store) != before:
            problem = "store: a failed ingest changed the store"
    return Outcome(code, problem, out, err)


def _import(auto: bool) -> Check:
    """import (--from the case's format unless ``auto``): no crash; a bad log is exit 1 (2 only
    when the format could not be told, without --from); what is written is a valid trace."""

    def check(case: Case, main: Path, work: Path) -> Outcome:
        out_file = work / "imported.jsonl"
        argv = ["import", str(main), "-o", str(out_file), "-q"]
        if not auto:
            argv += ["--from", case.importer or ""]
        code, out, err, exc = run_cli(argv)
        problem = _crash(code, err, exc)
        if problem is None and not auto and code == 2:
            problem = f"exit 2 (usage) on a bad log named with --from: {err.strip()[:300]}"
        if problem is None and out_file.exists() and code == 0:
            from orchestrace.core.validate import validate_path

            r = validate_path(out_file)
            if not r.valid:
                problem = f"import wrote an invalid trace: {r.findings[:2]}"
        return Outcome(code, problem, out, err)

    return check


def _validate_dir(case: Case, main: Path, work: Path) -> Outcome:
    """validate --format json on the folder that holds the case beside a good trace: one
    complete document with an entry per file, the good file's verdict valid."""
    good = good_trace_file(work)
    code, out, err, exc = run_cli(["validate", "--format", "json", str(work)])
    problem = _crash(code, err, exc)
    if problem is None:
        try:
            verdicts = {Path(d["path"]).name: d["valid"] for d in json.loads(out)}
            if verdicts.get(good.name) is not True:
                problem = f"validate DIR --format json: the good file's verdict is lost: {verdicts}"
        except (ValueError, KeyError, TypeError):
            problem = f"validate DIR --format json printed no complete JSON document ({len(out)} bytes)"
    return Outcome(code, problem, out, err)


def _repair(case: Case, main: Path, work: Path) -> Outcome:
    """repair: no crash; what it writes (exit 0) is a valid trace; a failure writes nothing."""
    fixed = work / "fixed.events.jsonl"
    code, out, err, exc = run_cli(["repair", str(main), "-o", str(fixed)])
    problem = _crash(code, err, exc)
    if problem is None and code != 0 and fixed.exists():
        problem = f"partial output: exit {code} left {fixed.name}"
    if problem is None and code == 0 and not validate_verdict(fixed):
        problem = "repair wrote a trace that does not validate"
    return Outcome(code, problem, out, err)


#: export target -> the output name (a folder for the trainer targets)
EXPORT_OUTPUTS = {
    "survey": "o.survey.jsonl",
    "jsonl": "o.jsonl",
    "otlp": "o.otlp.json",
    "trl": "trl",
    "verl": "verl",
    "samples": "samples",
}

# SQL text for the query command: values of every DuckDB type at the edges of their range,
# nested values, the store's own columns, and statements that are not one valid read-only query
_SQL_VALUES = (
    "NULL", "1", "-0.0", "1e308*10", "'nan'::DOUBLE", "2::HUGEINT**100", "2::UHUGEINT**127",
    "1::DECIMAL(38,10)/3", "'x'", "chr(0)", "repeat('é', 70000)", "'\\x00\\xff'::BLOB",
    "INTERVAL 5 DAY", "DATE '0001-01-01'", "'infinity'::TIMESTAMP", "'-infinity'::DATE",
    "TIMESTAMP '294247-01-10 04:00:54'", "DATE '-5000-01-01'", "'infinity'::TIMESTAMPTZ",
    "TIME '24:00:00'", "TIMETZ '12:00:00+05'", "'2020-01-01'::TIMESTAMP_NS", "'infinity'::TIMESTAMP_S",
    "gen_random_uuid()", "'101'::BITSTRING", "union_value(a := 1)", "{'a': 1, 'b': [1, 2]}",
    "MAP {'k': 1}", "[1.5, NULL]::FLOAT[]", "[DATE '-5000-01-01']", "{'t': 'infinity'::TIMESTAMP}",
    "[1, 2]::INTEGER[2]", "'{\"a\": 1}'::JSON", "123456789012345678901234567890::VARINT",
    "range(3)", "1::UTINYINT",
)  # fmt: skip
_SQL_STATEMENTS = (
    "SELECT * FROM events", "SELECT * FROM traces", "SELECT attrs, content FROM events",
    "SELECT * FROM edges, agents LIMIT 50", "SELECT * FROM metrics", "SELECT * FROM rewards",
    "SELEC 1", "", ";", "SELECT 1; SELECT 2", "SELECT * FROM nowhere", "DELETE FROM events",
    "CREATE TABLE x (a INT)", "SELECT 1/0", "SELECT 'a'::INT", "SELECT [1][5]",
    "SELECT 1 AS a, 2 AS a", "SELECT * FROM range(3) t(a) WHERE a > 'x'",
)  # fmt: skip


def _sql(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return rng.choice(_SQL_STATEMENTS)
    values = [rng.choice(_SQL_VALUES) for _ in range(rng.randint(1, 3))]
    return "SELECT " + ", ".join(f"{v} AS c{i}" for i, v in enumerate(values))


def _store(work: Path) -> Path:
    """A copy of a store holding the good trace (made once per run) in ``work``."""
    if "store" not in _STORE_TEMPLATE:
        tpl = Path(work.parent if work.name.startswith("c") else work) / "_template.duckdb"
        if not tpl.exists():
            code, _, err, _exc = run_cli(["ingest", str(good_trace_file(tpl.parent)), "-s", str(tpl), "-q"])
            assert code == 0, err
        _STORE_TEMPLATE["store"] = tpl
    store = work / "s.duckdb"
    shutil.copy(_STORE_TEMPLATE["store"], store)
    return store


def _query(case: Case, main: Path, work: Path) -> Outcome:
    """query: hostile SQL on a store (or the case's file given as the store): no crash, a
    refused query is exit 1 or 2, --format json prints one complete document when it succeeds."""
    rng = random.Random(case.seed)
    store = _store(work) if rng.random() < 0.8 else main
    fmt = rng.choice(["table", "json", "csv"])
    code, out, err, exc = run_cli(["query", _sql(rng), "-s", str(store), "-f", fmt])
    problem = _crash(code, err, exc)
    if problem is None and code == 0 and fmt == "json":
        try:
            json.loads(out)
        except ValueError:
            problem = f"query --format json printed no complete JSON document ({len(out)} bytes)"
    return Outcome(code, problem, out, err)


# ---------------------------------------------------------------- view --serve: malformed HTTP

PAGE = "<!DOCTYPE html><p>the page</p>"
_METHODS = (b"GET", b"get", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"CONNECT", b"G\x00T", b"")
_PATHS = (b"/", b"/index.html", b"/index.html?x=1#y", b"//", b"/../../etc/passwd", b"/%2e%2e/%2e%2e/etc/passwd",
          b"http://127.0.0.1/", b"*", b"/%00", b"/\xff\xfe", b"", b"/" + b"a" * 70_000, b"/\r\nX: y")  # fmt: skip
_VERSIONS = (b"HTTP/1.0", b"HTTP/1.1", b"HTTP/2.0", b"HTTP/9.9", b"HTTP/1.1.1", b"HTTP/", b"FOO", b"")


def http_request(rng: random.Random, port: int) -> bytes:
    """Raw bytes of an HTTP request a browser would not send: garbage, a broken request line,
    odd methods and paths, too many or too long headers, bad Host values, a lying body length."""
    if rng.random() < 0.1:
        return rng.randbytes(rng.choice([0, 1, 50, 5000]))
    line = b" ".join([rng.choice(_METHODS), rng.choice(_PATHS), rng.choice(_VERSIONS)])
    host = rng.choice(
        [f"127.0.0.1:{port}".encode(), b"localhost", b"evil.example", b"", b"\xff", b"127.0.0.1:1"]
    )
    headers = [b"Host: " + host] if rng.random() < 0.8 else []
    k = rng.randrange(8)
    if k == 0:
        headers += [b"X-%d: v" % i for i in range(rng.choice([50, 150]))]
    elif k == 1:
        headers.append(b"X-Long: " + b"v" * rng.choice([1000, 70_000]))
    elif k == 2:
        headers.append(b"Content-Length: " + rng.choice([b"-1", b"abc", b"99999999999999999999", b"5"]))
    elif k == 3:
        headers += [b"Transfer-Encoding: chunked", b"Host: evil.example"]
    elif k == 4:
        headers.append(b"no colon here")
    elif k == 5:
        headers.append(b" folded: continuation")
    end = rng.choice([b"\r\n", b"\n"])
    data = end.join([line, *headers]) + end + end + (b"body" if rng.random() < 0.2 else b"")
    return data[: rng.randrange(len(data))] if rng.random() < 0.15 else data  # cut mid-request


def _exchange(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send ``data`` to 127.0.0.1:port, close the writing side, read until the server closes."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered (414, 431) and closed before reading it all
            pass
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
        return b"".join(chunks)


def _asked(request: bytes) -> bytes | None:
    """The path (without a query) a GET request line asks for, leading slashes collapsed as
    http.server does; None for anything else."""
    words = request.split(b"\n", 1)[0].rstrip(b"\r").split()
    if len(words) < 2 or words[0] != b"GET":
        return None
    path = words[1].split(b"?", 1)[0]
    return b"/" + path.lstrip(b"/") if path.startswith(b"//") else path


def _view_serve(case: Case, main: Path, work: Path) -> Outcome:
    """view --serve's server (loopback, a free port) gets malformed requests; each one is
    answered with an error status (an HTTP/0.9 request line with an error page alone) or
    dropped, never a 5xx from a bug, the page only for a GET of / or /index.html, no exception in
    a handler; a good GET still gets the page.
    Bounded: a few requests, each with a 5 s socket timeout."""
    from orchestrace.viewer.serve import make_server

    rng = random.Random(case.seed)
    server = make_server(PAGE)  # what view --serve runs, on a free port of 127.0.0.1
    port = server.server_address[1]
    errors: list[str] = []
    server.handle_error = lambda request, address: errors.append(repr(sys.exc_info()[1]))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    problem = None
    try:
        for _ in range(3):
            data = http_request(rng, port)
            reply = _exchange(port, data)
            status = reply.split(b"\r\n", 1)[0]
            code = int(status.split()[1]) if len(status.split()) > 1 and status.split()[1].isdigit() else None
            if code is not None and code >= 500 and code not in (501, 505):
                problem = f"HTTP {code} for {data[:120]!r}"
            elif PAGE.encode() in reply and _asked(data) not in (b"/", b"/index.html"):
                problem = f"the page served for {data[:120]!r}"
            if problem:
                break
        good = _exchange(port, f"GET / HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        if problem is None and not (good.startswith(b"HTTP/1.0 200") and good.endswith(PAGE.encode())):
            problem = f"a good GET after malformed requests got {good[:100]!r}"
        if problem is None and errors:
            problem = f"a handler raised: {errors[0][:200]}"
    except OSError as e:  # a timeout or a refused connection: the server stopped answering
        problem = f"the server did not answer: {e!r}"
    finally:
        server.shutdown()
        server.server_close()
    return Outcome(0 if problem is None else None, problem)


# ---------------------------------------------------------------- orchestrace serve: the gateway

_CHAT = {
    "model": "researcher",
    "messages": [{"role": "user", "content": "What is the capital of France?"}],
    "max_tokens": 8,
}
_GATEWAY_PATHS = ("/v1/chat/completions", "/runs/r1/v1/chat/completions", "/runs/r1/end", "/runs/r1/agents-sdk/spans",
                  "/v1/models", "/runs/%2e%2e/v1/chat/completions", "/runs/" + "x" * 300 + "/end", "/runs//end")  # fmt: skip


def gateway_request(rng: random.Random, port: int) -> bytes:
    """A malformed HTTP request, or a POST to one of the gateway's routes whose JSON body is
    damaged (hostile values, wrong shapes, cut text) or whose Content-Length lies."""
    if rng.random() < 0.3:
        return http_request(rng, port)
    body = mutate_tree(_CHAT, rng) if rng.random() < 0.8 else mutate_text(orjson.dumps(_CHAT), rng)
    length = len(body) if rng.random() < 0.85 else rng.choice([0, len(body) + 7, max(0, len(body) - 3)])
    headers = [
        b"POST " + rng.choice(_GATEWAY_PATHS).encode() + b" HTTP/1.1",
        f"Host: 127.0.0.1:{port}".encode(),
        b"Content-Type: application/json",
        b"Content-Length: %d" % length,
    ]
    if rng.random() < 0.3:
        headers.append(b"X-Orchestrace-Agent: " + rng.choice([b"writer", b"", b"\xff", b"a" * 500]))
    if rng.random() < 0.2:
        headers.append(b"X-Orchestrace-Run: " + rng.choice([b"../x", b"r2", b"", b"a/b"]))
    return b"\r\n".join(headers) + b"\r\n\r\n" + body


def _gateway_serve(case: Case, main: Path, work: Path) -> Outcome:
    """orchestrace serve's gateway (a scripted model, a free port of 127.0.0.1) gets three
    hostile requests: each answered with a 4xx in OpenAI's error shape (505 for an HTTP version it
    does not speak) or dropped, never another 5xx,
    no exception in a handler; a good chat call is still answered. Each has a 5 s socket timeout."""
    from orchestrace.learn.gateway.completers import BackendCompleter
    from orchestrace.learn.gateway.launch import ServeOptions, build
    from orchestrace.runtime.backends.scripted import ScriptedBackend

    rng = random.Random(case.seed)
    opts = ServeOptions(port=0, runs=str(work / "runs"), agents="researcher,writer=editor", adapters="role")
    server = build(opts, BackendCompleter(ScriptedBackend(rules={"capital": "Paris."}), None, batch_window=0))
    port = server.server_address[1]
    errors: list[str] = []
    server.handle_error = lambda request, address: errors.append(repr(sys.exc_info()[1]))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    problem = None
    try:
        for _ in range(3):
            data = gateway_request(rng, port)
            reply = _exchange(port, data)
            words = reply.split(b"\r\n", 1)[0].split()
            code = int(words[1]) if len(words) > 1 and words[1].isdigit() else None
            if code is not None and code >= 500 and code != 505:  # 505: an HTTP version it does not speak
                problem = f"HTTP {code} for {data[:160]!r}: {reply[-200:]!r}"
                break
        body = orjson.dumps(_CHAT)
        good = _exchange(
            port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (port, len(body), body),
        )
        if problem is None and not (good.startswith(b"HTTP/1.1 200") and b"Paris." in good):
            problem = f"a good chat call after hostile requests got {good[:200]!r}"
        if problem is None and errors:
            problem = f"a handler raised: {errors[0][:200]}"
    except OSError as e:
        problem = f"the gateway did not answer: {e!r}"
    finally:
        server.shutdown()
        server.server_close()
        server.gateway.close()
    return Outcome(0 if problem is None else None, problem)


# ---------------------------------------------------------------- orchestrace ui: the trace browser

_UI_PATHS = ("/", "/index.html", "/trace", "/compare", "/runs", "/run", "/run/trace", "/run/pairs", "/x")
_UI_KEYS = ("system", "status", "date_from", "date_to", "reward_min", "reward_max", "text", "sort",
            "desc", "page", "id", "a", "b", "pick", "r", "it", "f", "")  # fmt: skip
_UI_VALUES = ("", "0", "-1", "1e308", "nan", "inf", "9" * 40, "2026-02-30", "2026-01-01", "date", "usd",
              "a'; DROP TABLE traces; --", "%", "%zz", "%ff", "é", "\x00", "../../etc/passwd",
              "gen-centralized-12-7", "x" * 5000, "1", "true")  # fmt: skip


def ui_request(rng: random.Random, port: int) -> bytes:
    """A GET of one of the browser's pages with hostile parameters (SQL-looking text, numbers
    out of range, bad dates, bad percent-encoding, repeats), or a malformed HTTP request."""
    if rng.random() < 0.2:
        return http_request(rng, port)
    from urllib.parse import quote

    parts = []
    for _ in range(rng.randint(0, 4)):
        value = rng.choice(_UI_VALUES)
        raw = rng.random() < 0.2  # not percent-encoded: a space, a bare % or a & in the value
        parts.append(f"{rng.choice(_UI_KEYS)}={value if raw else quote(value, safe='')}")
    if rng.random() < 0.1:
        parts.append(rng.choice(["a", "=", "&", "x=1&x=2"]))
    target = rng.choice(_UI_PATHS) + ("?" + "&".join(parts) if parts else "")
    return f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode(
        "utf-8", "surrogateescape"
    )


def _ui_serve(case: Case, main: Path, work: Path) -> Outcome:
    """orchestrace ui over a store holding one trace (a free port of 127.0.0.1, one server for the
    run) gets three hostile requests: each answered with a 4xx page (or 501, 505), never a 500 (its answer to a bug), and a good
    list page is still answered. Each has a 5 s socket timeout."""
    rng = random.Random(case.seed)
    port = _ui_port(work)
    problem = None
    try:
        for _ in range(3):
            data = ui_request(rng, port)
            reply = _exchange(port, data)
            words = reply.split(b"\r\n", 1)[0].split()
            code = int(words[1]) if len(words) > 1 and words[1].isdigit() else None
            if code is not None and code >= 500 and code not in (501, 505):  # an unknown method, version
                problem = f"HTTP {code} for {data[:200]!r}"
                break
        good = _exchange(port, f"GET / HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        if problem is None and not good.startswith(b"HTTP/1.0 200"):
            problem = f"a good list request after hostile ones got {good[:200]!r}"
    except OSError as e:
        problem = f"the browser did not answer: {e!r}"
    return Outcome(0 if problem is None else None, problem)


_UI: dict[str, int] = {}


def _ui_port(work: Path) -> int:
    """The port of one browser server for the whole run (opening the store takes 0.4 s), over a
    store of its own beside the work folder; stopped when the process exits."""
    if "port" not in _UI:
        import atexit

        from orchestrace.viewer.browse.server import ui_server

        folder = work.parent / "_ui"
        folder.mkdir(exist_ok=True)
        server, app = ui_server(str(_store(folder)))
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

        def stop() -> None:
            server.shutdown()
            server.server_close()
            app.store.con.close()

        atexit.register(stop)
        _UI["port"] = server.server_address[1]
    return _UI["port"]


# ---------------------------------------------------------------- task files (train team --tasks)


def task_file_case(rng: random.Random, seed: int) -> Case:
    """A damaged task file: lines of a shipped one with hostile values or bytes, maybe gzip'd.
    The name carries the seed: ``load_tasks`` caches by path, time and size."""
    from importlib import resources

    shipped = resources.files("orchestrace.learn") / "task_files" / "capitals.jsonl"
    recs = [orjson.loads(x) for x in shipped.read_bytes().splitlines()[:12] if x.strip()]
    lines = [orjson.dumps(r) for r in recs]
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        hot = [("id",), ("question",), ("answer",), ("split",), ("metadata",), ("prompt",)]
        lines[i] = mutate_tree(recs[i], rng, hot) if rng.random() < 0.8 else mutate_text(lines[i], rng)
    data = b"\n".join(lines) + b"\n"
    name = f"tasks-{seed}.jsonl"
    if rng.random() < 0.25:
        data, name = compress(data, rng), name + ".gz"
    return Case("tasks", {name: data}, name)


def _task_file(case: Case, main: Path, work: Path) -> Outcome:
    """load_tasks (what train team --tasks and serve read): a TaskSet or a TaskFileError (exit 1
    with the file and line), never another exception."""
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.tasks import load_tasks

    try:
        tasks = load_tasks(str(main))
    except OrchestraceError as e:
        if e.exit_code != 1 or e.path is None:
            return Outcome(e.exit_code, f"task file error without exit 1 and its file: {e}")
        return Outcome(1, None)
    except Exception as e:  # noqa: BLE001 - the point: only our errors may escape
        return Outcome(None, f"uncaught {type(e).__name__} in load_tasks: {str(e)[:200]}")
    return Outcome(0, None if tasks.items else "a task set without questions")


# ---------------------------------------------------------------- side files (28 Nov audit)

#: TOML values a reward spec's writer would not put at a place (the JSON ones do not all parse)
_TOML_VALUES = (
    "nan", "inf", "-inf", "-1", "0", "9223372036854775808", "1e400", '"x"', '""', '"a:b"', '"os:getcwd"',
    "true", "[1]", '["a", 2]', "{a = 1}", "[]", "1979-05-27", '"process"', '"team"', '"agent/x"', "3.5",
)  # fmt: skip
_SPEC = (
    'total = "hybrid"\nteam_channel = "team"\n[[terms]]\nchannel = "team"\nweight = 1.0\n'
    '[[terms]]\nchannel = "r_parallel"\nweight = 0.1\n'
    'schedule = { kind = "linear", start = 1.0, end = 0.0, steps = 10, boundaries = [], values = [] }\n'
    "[caps]\nmax_spawn = 8\nmin_subagent_steps = 1\nmax_tool_calls_per_agent = 10\n"
    "max_message_tokens = 512\ntool_spam_penalty = 0.5\nmax_critical_steps = 100.0\n"
    '[hooks]\nverifier = "orchestrace.reward.verifiers:calls_succeeded"\n'
)


def reward_spec_case(rng: random.Random) -> Case:
    """A reward spec (``reward -s``) with one to three values swapped for hostile TOML, or its bytes
    damaged."""
    lines = _SPEC.splitlines()
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        key, eq, _ = lines[i].partition(" = ")
        if eq:
            lines[i] = f"{key} = {rng.choice(_TOML_VALUES)}"
    data = ("\n".join(lines) + "\n").encode()
    if rng.random() < 0.2:
        data = mutate_text(data, rng)
    return Case("spec", {"spec.toml": data}, "spec.toml")


def _reward_spec(case: Case, main: Path, work: Path) -> Outcome:
    """reward -s SPEC on a good trace: a result or bad input, never a crash."""
    argv = ["reward", "-q", "-s", str(main), str(good_trace_file(work)), "-o", str(work / "r.jsonl")]
    code, out, err, exc = run_cli(argv)
    problem = _crash(code, err, exc)
    if problem is None and code != 0 and (work / "r.jsonl").exists():
        problem = "a failed reward left its output"
    return Outcome(code, problem, out, err)


def _vote_traces() -> list[dict[str, Any]]:
    import tempfile

    from orchestrace.learn.stopping.banks import Bank, BankQuestion
    from orchestrace.learn.stopping.traces import bank_to_traces

    with tempfile.TemporaryDirectory() as d:
        q = BankQuestion("q0", "Q?", "a", ["a", "b", "a"], cost=[1.0, 2.0, 1.0], correct=[True, False, True])
        (path,) = bank_to_traces(Bank("fuzz", [q]), d)
        return [orjson.loads(x) for x in Path(path).read_bytes().splitlines()]


def vote_trace_case(rng: random.Random) -> Case:
    """A vote run (what train stop --traces reads) whose runtime config or a return's attrs hold
    hostile values."""
    recs = _vote_traces()
    targets = [i for i, r in enumerate(recs) if r.get("type") in ("return", "orchestrator_decision")]
    i = rng.choice([len(recs) - 1, *targets])
    hot = [("metadata", "runtime", "config", k) for k in ("gold", "family", "question_id", "bank", "budget")]
    hot += [("attrs", k) for k in ("answer", "sample_cost", "correct", "prob", "samples")]
    lines = [orjson.dumps(r) for r in recs]
    lines[i] = mutate_tree(recs[i], rng, hot)
    return Case("events", {"run.events.jsonl": b"\n".join(lines) + b"\n"}, "run.events.jsonl")


def _vote_trace_bank(case: Case, main: Path, work: Path) -> Outcome:
    """bank_from_traces: a bank or bad input naming the file, never another exception."""
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.stopping.traces import bank_from_traces

    try:
        bank_from_traces(str(main))
    except OrchestraceError as e:
        if e.exit_code == 3 or (e.path is None and e.code != "OT613"):
            return Outcome(e.exit_code, f"vote run error without its file: {e}")
        return Outcome(e.exit_code, None)
    except Exception as e:  # noqa: BLE001 - the point: only our errors may escape
        return Outcome(None, f"uncaught {type(e).__name__} in bank_from_traces: {str(e)[:200]}")
    return Outcome(0, None)


def loop_record_case(rng: random.Random) -> Case:
    """A loop folder (what eval team, a resume and bench team --report-only read) whose
    iteration.json or config.json holds hostile values."""
    config = {"family": "continents", "credit": "grpo", "seed": 0, "lr": 0.002}
    recs = [
        {"iteration": i, "policy": None if i == 0 else f"iter-{i:03d}/policy", "traces": [],
         "train": {} if i == 0 else {"reward": 0.5, "rollout_s": 1.0, "update_s": 2.0},
         "eval": {"team_accuracy": 0.5}}
        for i in range(3)
    ]  # fmt: skip
    files = {f"iter-{i:03d}/iteration.json": orjson.dumps(r) for i, r in enumerate(recs)}
    files["config.json"] = orjson.dumps(config)
    name = rng.choice(sorted(files))
    doc = config if name == "config.json" else recs[int(name[5:8])]
    files[name] = mutate_tree(doc, rng) if rng.random() < 0.8 else mutate_text(files[name], rng)
    return Case("loop", files, name)


def _loop_records(case: Case, main: Path, work: Path) -> Outcome:
    """completed() and eval team on the folder: records or bad input, never a crash."""
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.loop import completed

    try:
        completed(work)
    except OrchestraceError as e:
        if e.exit_code == 3 or e.path is None:
            return Outcome(e.exit_code, f"loop record error without its file: {e}")
    except Exception as e:  # noqa: BLE001 - the point: only our errors may escape
        return Outcome(None, f"uncaught {type(e).__name__} in completed: {str(e)[:200]}")
    code, out, err, exc = run_cli(["eval", "team", str(work), str(work)])
    return Outcome(code, _crash(code, err, exc), out, err)


def _stop_policy_files() -> dict[str, bytes]:
    import tempfile

    from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy

    with tempfile.TemporaryDirectory() as d:
        StopPolicy.init(PolicyConfig(hidden=[4], budget=8), seed=0).save(f"{d}/p")
        return {name: Path(d, name).read_bytes() for name in ("p.json", "p.safetensors")}


def stop_policy_case(rng: random.Random) -> Case:
    """A stop policy (``eval stop -p``, ``run --policy stop=``) whose .json config is damaged."""
    files = _stop_policy_files()
    cfg = orjson.loads(files["p.json"])
    hot = [(k,) for k in ("budget", "cost", "threshold", "hidden", "activation", "features", "mixture")]
    files["p.json"] = mutate_tree(cfg, rng, hot) if rng.random() < 0.8 else mutate_text(files["p.json"], rng)
    return Case("policy", files, "p.json")


def _stop_policy(case: Case, main: Path, work: Path) -> Outcome:
    """StopPolicy.load: a policy or bad input naming the file, never another exception."""
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.stopping.policy import StopPolicy

    try:
        StopPolicy.load(str(main))
    except OrchestraceError as e:
        return Outcome(
            e.exit_code, None if e.exit_code != 3 and e.path else f"policy error without its file: {e}"
        )
    except Exception as e:  # noqa: BLE001 - the point: only our errors may escape
        return Outcome(None, f"uncaught {type(e).__name__} in StopPolicy.load: {str(e)[:200]}")
    return Outcome(0, None)


def bank_case(rng: random.Random) -> Case:
    """A sample bank (``train stop -b``, ``eval stop -b``) with hostile values on some lines."""
    recs = [{"id": f"q{i}", "question": "Q?", "gold": "a", "samples": ["a", "b", None],
             "correct": [True, False, False], "cost": [1, 2.5, 0]} for i in range(4)]  # fmt: skip
    lines = [orjson.dumps(r) for r in recs]
    for _ in range(rng.randint(1, 2)):
        i = rng.randrange(len(lines))
        lines[i] = mutate_tree(recs[i], rng) if rng.random() < 0.8 else mutate_text(lines[i], rng)
    data = b"\n".join(lines) + b"\n"
    name = "bank.jsonl"
    if rng.random() < 0.25:
        data, name = compress(data, rng), name + ".gz"
    return Case("bank", {name: data}, name)


def _bank(case: Case, main: Path, work: Path) -> Outcome:
    """load_bank and bank info: a bank or bad input naming the file, never a crash."""
    code, out, err, exc = run_cli(["bank", "info", str(main)])
    return Outcome(code, _crash(code, err, exc), out, err)


_RECORDED: dict[str, bytes] = {}


def _recorded_run() -> dict[str, bytes]:
    """A scripted vote run and its call cache, recorded once per process."""
    if not _RECORDED:
        import tempfile

        from orchestrace.runtime.runner import backend_spec, run

        with tempfile.TemporaryDirectory() as d:
            run("vote", f"{d}/r.events.jsonl", backend=backend_spec("scripted"), config={"budget": 2})
            for name in ("r.events.jsonl", "r.cache.jsonl"):
                _RECORDED[name] = Path(d, name).read_bytes()
    return dict(_RECORDED)


def replay_case(rng: random.Random) -> Case:
    """A recorded run (``replay``, ``fork``) whose metadata.runtime or metadata.fork is damaged."""
    files = _recorded_run()
    recs = [orjson.loads(x) for x in files["r.events.jsonl"].splitlines()]
    last = recs[-1]
    if rng.random() < 0.3:
        last["metadata"]["fork"] = {"parent": "x", "at": "e1", "index": 1, "do": "stop", "fresh_ids_from": 9}
    hot = [
        ("metadata", "runtime", k)
        for k in ("program", "config", "seed", "clock", "timeout", "retries", "budget")
    ]
    hot += [("metadata", "fork", k) for k in ("at", "index", "do", "fresh_ids_from")]
    recs_text = [orjson.dumps(r) for r in recs[:-1]] + [mutate_tree(last, rng, hot)]
    files["r.events.jsonl"] = b"\n".join(recs_text) + b"\n"
    return Case("events", files, "r.events.jsonl")


def _replay(case: Case, main: Path, work: Path) -> Outcome:
    """replay of the damaged run: a replay or bad input, never a crash."""
    code, out, err, exc = run_cli(["replay", str(main), "-o", str(work / "again.events.jsonl")])
    return Outcome(code, _crash(code, err, exc), out, err)


TRACE_COMMANDS: dict[str, Check] = {
    "load": _load_agrees,
    "validate": _main_input_check(lambda f, w: ["validate", str(f)], agree=False),
    "validate-json-multi": _validate_multi,
    "stats": _main_input_check(lambda f, w: ["stats", "--format", "json", str(f)], json_out=True),
    "stats-multi": _report_multi(["stats", "--format", "json"]),
    "analyze": _main_input_check(lambda f, w: ["analyze", "-q", str(f)]),
    "analyze-json": _main_input_check(
        lambda f, w: ["analyze", "-q", "--format", "json", str(f)], json_out=True
    ),
    "analyze-json-multi": _report_multi(["analyze", "-q", "--format", "json"]),
    "analyze-write": _main_input_check(
        lambda f, w: ["analyze", "-q", str(f), "--write", str(w / "measured.jsonl")], output="measured.jsonl"
    ),
    "reward": _main_input_check(
        lambda f, w: ["reward", "-q", str(f), "-o", str(w / "rewarded.jsonl")], output="rewarded.jsonl"
    ),
    "credit": _main_input_check(
        lambda f, w: ["credit", "-q", str(f), "-o", str(w / "credited.jsonl")], output="credited.jsonl"
    ),
    "critical-path": _main_input_check(lambda f, w: ["critical-path", str(f)]),
    "safety": _main_input_check(lambda f, w: ["safety", str(f)]),
    "view": _main_input_check(
        lambda f, w: ["view", str(f), "-o", str(w / "v.html")], first_only=True, output="v.html"
    ),
    "ingest": _ingest,
    "validate-dir-json": _validate_dir,
    "repair": _repair,
    **{
        f"export:{target}": _main_input_check(
            lambda f, w, t=target: ["export", str(f), "--to", t, "-o", str(w / EXPORT_OUTPUTS[t])],
            output=EXPORT_OUTPUTS[target],
            agree=target != "trl",  # trl refuses traces without content (OT421), as the seed is
            refusal="OT416" if target == "otlp" else None,  # a time past OTLP's uint64 nanoseconds
        )
        for target in EXPORT_OUTPUTS
    },
    "query": _query,
    "view-serve": _view_serve,
    "gateway-serve": _gateway_serve,
    "task-file": _task_file,
    "ui-serve": _ui_serve,
    "reward-spec": _reward_spec,
    "vote-traces": _vote_trace_bank,
    "loop-records": _loop_records,
    "stop-policy": _stop_policy,
    "bank": _bank,
    "replay-meta": _replay,
}
IMPORT_COMMANDS: dict[str, Check] = {
    **{f"import:{fmt}": _import(auto=False) for fmt in IMPORTERS},
    "import-auto": _import(auto=True),
}


def make_case(seed: int, command: str) -> Case:
    rng = random.Random(seed)
    if command.startswith("import:"):
        return importer_case(rng, command.removeprefix("import:"))
    if command in IMPORT_COMMANDS:
        return importer_case(rng, rng.choice(IMPORTERS))
    if command == "task-file":
        return task_file_case(rng, seed)
    side = {
        "reward-spec": reward_spec_case,
        "vote-traces": vote_trace_case,
        "loop-records": loop_record_case,
        "stop-policy": stop_policy_case,
        "bank": bank_case,
        "replay-meta": replay_case,
    }
    if command in side:
        return side[command](rng)
    return trace_case(rng)


def run_case(seed: int, command: str, work: Path) -> Outcome:
    """Make case ``seed`` for ``command``, write it under ``work`` (emptied first) and check it."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    case = make_case(seed, command)
    case.seed = seed
    main = write_case(case, work)
    check = {**TRACE_COMMANDS, **IMPORT_COMMANDS}[command]
    try:
        return check(case, main, work)
    except Exception as e:  # noqa: BLE001 - validate_path (the oracle) itself must not raise
        return Outcome(None, f"uncaught {type(e).__name__} in the library: {str(e)[:200]}")


ALL_COMMANDS = (*TRACE_COMMANDS, *IMPORT_COMMANDS)
