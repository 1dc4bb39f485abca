"""Planted secrets in realistic Claude Code and Codex logs: every kind is redacted by
``--keep-content``, ordinary text (code, git SHAs, UUIDs) is not, and home paths leave ``cwd``."""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrace import importers
from orchestrace.cli import app
from orchestrace.core.io import dumps, load
from orchestrace.importers.redact import home_to_tilde, redact

_RNG = random.Random(18)
_B64 = string.ascii_letters + string.digits + "+/"
_ALNUM = string.ascii_letters + string.digits


def _rand(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def _pem(kind: str) -> tuple[str, list[str]]:
    body = base64.b64encode(_RNG.randbytes(600)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----\n", lines


def _jwt() -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = {"sub": "1234567890", "name": "Ops Bot", "iat": 1767225600}
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{head}.{body}.{_rand(43, _ALNUM + '-_')}"


def _corpus() -> dict[str, tuple[str, list[str]]]:
    """kind -> (text as an agent log would hold it, the secret strings that must not survive)."""
    aws_secret, aws_bare, aws_id = (
        _rand(40, _B64),
        _rand(40, _B64),
        "AKIA" + _rand(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
    )
    rsa, rsa_lines = _pem("RSA PRIVATE KEY")
    ossh, ossh_lines = _pem("OPENSSH PRIVATE KEY")
    gcp_key, gcp_lines = _pem("PRIVATE KEY")
    gcp_id = _rand(40, "0123456789abcdef")
    gcp = json.dumps(
        {"type": "service_account", "project_id": "acme-prod", "private_key_id": gcp_id,
         "private_key": gcp_key, "client_email": "ci@acme-prod.iam.gserviceaccount.com"}, indent=2
    )  # fmt: skip
    stripe, glpat, npm = "sk_live_" + _rand(99), "glpat-" + _rand(20, _ALNUM + "_-"), "npm_" + _rand(36)
    sendgrid = "SG." + _rand(22, _ALNUM + "_-") + "." + _rand(43, _ALNUM + "_-")
    jwt = _jwt()
    curl_pw, azure = "Tr0ub4dor&3x", _rand(86, _B64) + "=="
    ghp, gh_pat = "ghp_" + _rand(36), "github_pat_" + _rand(22) + "_" + _rand(59)
    slack, slack_hook = f"xoxb-{_RNG.randrange(10**11)}-{_RNG.randrange(10**12)}-{_rand(24)}", _rand(24)
    openai_key, anthropic = "sk-proj-" + _rand(48, _ALNUM + "_-"), "sk-ant-api03-" + _rand(93, _ALNUM + "_-")
    google, hf, url_pw = "AIza" + _rand(35, _ALNUM + "_-"), "hf_" + _rand(34), "pg_" + _rand(14)
    bearer, basic = _rand(32, _ALNUM + "-_"), base64.b64encode(b"svc-deploy:" + _rand(12).encode()).decode()
    db_pw, pgpass = "q7!Lz" + _rand(10), _rand(16)
    return {
        "aws_env": (f"export AWS_ACCESS_KEY_ID={aws_id}\nexport AWS_SECRET_ACCESS_KEY={aws_secret}\n", [aws_secret, aws_id]),
        "aws_bare": (f"User name,Access key ID,Secret access key\nci-bot,{aws_id},{aws_bare}\n", [aws_bare]),
        "pem_rsa": (f"$ cat deploy/id_rsa\n{rsa}", rsa_lines),
        "openssh": (f"~/.ssh/id_ed25519:\n{ossh}", ossh_lines),
        "stripe": (f"STRIPE_KEY is {stripe} (live mode)", [stripe[:20], stripe[-20:]]),
        "gitlab": (f"git remote set-url origin https://gitlab.com/acme/api.git # token {glpat}", [glpat]),
        "npm": (f"npm config set //registry.npmjs.org/:_authToken {npm}", [npm]),
        "sendgrid": (f"SENDGRID={sendgrid}", [sendgrid]),
        "jwt": (f"the session cookie was {jwt} and it expires tomorrow", [jwt.split(".")[1], jwt.split(".")[2]]),
        "curl_user": (f"curl -sS -u deploy:{curl_pw} https://ci.acme.dev/api/builds", [curl_pw]),
        "azure": (f"DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey={azure};EndpointSuffix=core.windows.net", [azure[:40]]),
        "gcp_service_account": (f"$ cat sa.json\n{gcp}", [*gcp_lines, gcp_id]),
        "github": (f"gh auth login --with-token <<< {ghp}", [ghp]),
        "github_pat": (f"GH_TOKEN={gh_pat} gh pr list", [gh_pat]),
        "slack": (f"SLACK_BOT_TOKEN={slack}", [slack.split("-")[-1]]),
        "slack_webhook": (f"post to https://hooks.slack.com/services/T0{_rand(8)}/B0{_rand(8)}/{slack_hook}", [slack_hook]),
        "openai": (f"client = OpenAI(api_key=\"{openai_key}\")", [openai_key]),
        "anthropic": (f"ANTHROPIC_API_KEY={anthropic} claude -p hi", [anthropic[:30]]),
        "google": (f"https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={google}", [google]),
        "huggingface": (f"huggingface-cli login --token {hf}", [hf]),
        "url_password": (f"DATABASE_URL=postgresql://app:{url_pw}@db.internal:5432/app", [url_pw]),
        "bearer_header": (f"curl -H 'Authorization: Bearer {bearer}' https://api.acme.dev/v1/me", [bearer]),
        "basic_header": (f"GET /admin HTTP/1.1\nHost: acme.dev\nAuthorization: Basic {basic}\n", [basic]),
        "json_password": (json.dumps({"db": {"host": "db", "user": "app", "password": db_pw}}), [db_pw]),
        "pgpassword": (f"PGPASSWORD={pgpass} psql -h db -U app", [pgpass]),
    }  # fmt: skip


CORPUS = _corpus()

# ordinary text that must come through unchanged
SHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"
ORDINARY = [
    f"commit {SHA}\nAuthor: Dev <dev@example.com>\n\n    fix: retry on 503",
    f"request id {uuid.UUID(int=_RNG.getrandbits(128))} took 231 ms",
    "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    "def login(user, password):\n    token = make_token(user)\n    return check(password=password, token=token)",
    "api_key = os.environ['OPENAI_API_KEY']\nsecret = settings.SECRET_KEY",
    "export OPENAI_API_KEY=$OPENAI_API_KEY  # set it in your shell",
    "The bearer authentication scheme sends a token; basic authentication sends user:password.",
    "PWD=/home/ci/work\nOLDPWD=/home/ci",
    "https://github.com/acme/api/blob/9fceb02d0ae598e95dc970b74767f19372d61af8/src/app.py#L10",
    "Ran 12 tests in 0.3s; see https://docs.python.org/3/library/secrets.html",
    "model: claude-sonnet-4-5-20250929, tokens in 1234, out 567",
    "const apiKey = process.env.API_KEY;",
]


@pytest.mark.parametrize("kind", sorted(CORPUS))
def test_each_kind_is_redacted(kind: str) -> None:
    text, secrets = CORPUS[kind]
    out = redact(text)
    assert [s for s in secrets if s in out] == [] and "[REDACTED]" in out, out


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact(text) == text


def test_redaction_keeps_what_surrounds_the_secret() -> None:
    text, _ = CORPUS["url_password"]
    assert redact(text) == "DATABASE_URL=postgresql://app:[REDACTED]@db.internal:5432/app"
    pem = redact(CORPUS["pem_rsa"][0])
    assert pem.startswith(
        "$ cat deploy/id_rsa\n-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY"
    )
    assert redact(redact(text)) == redact(text)
    cut = CORPUS["openssh"][0][:300]  # a key block cut off in a truncated tool output
    assert "[REDACTED]" in redact(cut) and cut[-30:] not in redact(cut)


def _claude_session(path: Path) -> None:
    """A Claude Code session: the planted texts in prompts, Bash commands, tool output, replies."""
    recs: list[dict] = []
    t = 0

    def ts() -> str:
        nonlocal t
        t += 1
        return f"2026-03-01T10:{t // 60:02d}:{t % 60:02d}Z"

    common = {
        "sessionId": "s-redact",
        "cwd": "/home/alice/src/acme-api",
        "version": "2.1.3",
        "gitBranch": "main",
    }
    for i, (kind, (text, _)) in enumerate(sorted(CORPUS.items())):
        where = i % 4
        if where == 0:
            recs.append(
                {
                    **common,
                    "type": "user",
                    "uuid": f"u{i}",
                    "timestamp": ts(),
                    "message": {"role": "user", "content": f"{kind}: {text}"},
                }
            )
            continue
        tid = f"toolu_{i:03d}"
        if where == 1:
            blk = {
                "type": "tool_use",
                "id": tid,
                "name": "Bash",
                "input": {"command": text, "description": f"check {kind}"},
            }
            out = "ok"
        elif where == 2:
            blk = {
                "type": "tool_use",
                "id": tid,
                "name": "Read",
                "input": {"file_path": f"/home/alice/src/acme-api/{kind}.txt"},
            }
            out = text
        else:
            recs.append(
                {
                    **common,
                    "type": "assistant",
                    "uuid": f"a{i}",
                    "timestamp": ts(),
                    "message": {
                        "id": f"m{i}",
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [{"type": "text", "text": f"I found this in the config: {text}"}],
                        "usage": {"input_tokens": 10, "output_tokens": 5},
                    },
                }
            )
            continue
        recs.append(
            {
                **common,
                "type": "assistant",
                "uuid": f"a{i}",
                "timestamp": ts(),
                "message": {
                    "id": f"m{i}",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [blk],
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                },
            }
        )
        recs.append(
            {
                **common,
                "type": "user",
                "uuid": f"r{i}",
                "timestamp": ts(),
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": tid, "content": out}],
                },
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")


def _codex_rollout(path: Path) -> None:
    """A Codex rollout: the planted texts in user messages, exec_command arguments, outputs, replies."""
    recs: list[dict] = [
        {"timestamp": "2026-03-01T10:00:00Z", "type": "session_meta", "payload": {"id": "r-redact", "cwd": "/Users/bob/work/acme", "cli_version": "0.125.0"}}
    ]  # fmt: skip
    for i, (kind, (text, _)) in enumerate(sorted(CORPUS.items())):
        stamp = f"2026-03-01T10:{i // 60:02d}:{i % 60:02d}.500Z"
        where = i % 4
        if where == 0:
            recs.append(
                {
                    "timestamp": stamp,
                    "type": "event_msg",
                    "payload": {"type": "user_message", "message": f"{kind}: {text}"},
                }
            )
        elif where in (1, 2):
            cmd, out = (text, "ok") if where == 1 else (f"cat {kind}.txt", text)
            recs.append(
                {
                    "timestamp": stamp,
                    "type": "response_item",
                    "payload": {
                        "type": "function_call",
                        "name": "exec_command",
                        "arguments": json.dumps({"cmd": cmd, "workdir": "/Users/bob/work/acme"}),
                        "call_id": f"call_{i}",
                    },
                }
            )
            recs.append(
                {
                    "timestamp": stamp,
                    "type": "response_item",
                    "payload": {
                        "type": "function_call_output",
                        "call_id": f"call_{i}",
                        "output": json.dumps({"output": out, "metadata": {"exit_code": 0}}),
                    },
                }
            )
        else:
            recs.append(
                {
                    "timestamp": stamp,
                    "type": "response_item",
                    "payload": {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": f"Found: {text}"}],
                    },
                }
            )
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_keep_content_import_redacts_every_kind(fmt: str, tmp_path: Path) -> None:
    src = tmp_path / ("session.jsonl" if fmt == "claude-code" else "rollout-2026-03-01T10-00-00-r.jsonl")
    (_claude_session if fmt == "claude-code" else _codex_rollout)(src)
    out = tmp_path / "kept.jsonl"
    res = CliRunner().invoke(app, ["import", "--from", fmt, str(src), "-o", str(out), "--keep-content"])
    assert res.exit_code == 0, res.output
    (tr,) = load(out)
    blob = dumps(tr).decode()
    raw = src.read_text()
    # the planted texts did reach the trace (redacted): the test would pass vacuously otherwise
    assert blob.count("[REDACTED]") >= len(CORPUS)
    leaked = {
        kind: [s for s in secrets if s in blob or json.dumps(s)[1:-1] in blob]
        for kind, (_, secrets) in CORPUS.items()
    }
    assert {k: v for k, v in leaked.items() if v} == {}
    assert all(s in raw or json.dumps(s)[1:-1] in raw for _, secrets in CORPUS.values() for s in secrets)


@pytest.mark.parametrize(
    ("fmt", "home", "full"),
    [
        ("claude-code", "~/src/acme-api", "/home/alice/src/acme-api"),
        ("codex", "~/work/acme", "/Users/bob/work/acme"),
    ],
)
def test_home_paths_leave_cwd(fmt: str, home: str, full: str, tmp_path: Path) -> None:
    src = tmp_path / ("session.jsonl" if fmt == "claude-code" else "rollout-2026-03-01T10-00-00-r.jsonl")
    (_claude_session if fmt == "claude-code" else _codex_rollout)(src)
    for keep in (False, True):
        (tr,) = list(importers.load(src, fmt, keep_content=keep))
        meta = tr.metadata
        cwd = meta["cwd"] if fmt == "claude-code" else meta["session"]["cwd"]
        assert cwd == home
        assert "alice" not in json.dumps(meta) and "/Users/bob" not in json.dumps(meta)
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(app, ["import", "--from", fmt, str(src), "-o", str(out), "--keep-home-paths"])
    assert res.exit_code == 0, res.output
    (tr,) = load(out)
    assert (tr.metadata["cwd"] if fmt == "claude-code" else tr.metadata["session"]["cwd"]) == full


def test_claude_code_project_folder_loses_the_user_name_too(tmp_path: Path) -> None:
    """The project folder is the cwd with "/" as "-": it names the user as the cwd does."""
    src = tmp_path / "-home-alice-src-acme-api" / "session.jsonl"
    src.parent.mkdir()
    _claude_session(src)
    (tr,) = list(importers.load(src, "claude-code"))
    assert (tr.metadata["cwd"], tr.metadata["project"]) == ("~/src/acme-api", "~-src-acme-api")
    (kept,) = list(importers.load(src, "claude-code", keep_home_paths=True))
    assert (kept.metadata["cwd"], kept.metadata["project"]) == (
        "/home/alice/src/acme-api",
        "-home-alice-src-acme-api",
    )


@pytest.mark.parametrize(
    ("path", "tilde"),
    [
        ("/home/alice/x", "~/x"),
        ("/Users/bob", "~"),
        ("/root/.config", "~/.config"),
        ("C:\\Users\\carol\\proj", "~\\proj"),
        ("/home", "/home"),
        ("/srv/app", "/srv/app"),
        ("/homework/a", "/homework/a"),
    ],
)
def test_home_to_tilde(path: str, tilde: str) -> None:
    assert home_to_tilde(path) == tilde


def test_prompts_kept_in_metadata_are_redacted_too(data: Path, tmp_path: Path) -> None:
    """Who&When keeps the question, ChatDev the task prompt, in the metadata with --keep-content."""
    key = CORPUS["anthropic"][1][0]
    ww = json.loads((data / "who-and-when/Who&When/Hand-Crafted/1.json").read_text())
    ww["question"] = f"{ww['question']} (use ANTHROPIC_API_KEY={key})"
    (tmp_path / "ww").mkdir()
    (tmp_path / "ww" / "1.json").write_text(json.dumps(ww))
    (tr,) = list(importers.load(tmp_path / "ww" / "1.json", "who-and-when", keep_content=True))
    assert key not in json.dumps(tr.metadata) and "ANTHROPIC_API_KEY=[REDACTED]" in tr.metadata["question"]
    src = data / "chatdev/WareHouse/DigitalClock_THUNLP_20230825093556"
    run = tmp_path / src.name
    run.mkdir()
    for f in src.iterdir():
        text = f.read_text(errors="replace")
        (run / f.name).write_text(text.replace("24-hour format.", f"24-hour format, token {key}."))
    log = run / f"{src.name}.log"
    (tr,) = list(importers.load(log, "chatdev", keep_content=True))
    assert "24-hour format, token [REDACTED]." in tr.metadata["task_prompt"]
    assert key not in dumps(tr).decode()


def test_openai_agents_error_messages_are_redacted(tmp_path: Path) -> None:
    """Span errors are kept without --keep-content too (a short diagnosis): never with a secret."""
    key = CORPUS["openai"][1][0]
    t = "2026-01-01T00:00:{:02d}+00:00"
    items = [
        {"object": "trace", "id": "trace_1", "workflow_name": "w", "group_id": None, "metadata": None},
        {"object": "trace.span", "id": "s1", "trace_id": "trace_1", "parent_id": None, "started_at": t.format(0), "ended_at": t.format(9), "span_data": {"type": "agent", "name": "lead"}, "error": None},
        {"object": "trace.span", "id": "s2", "trace_id": "trace_1", "parent_id": "s1", "started_at": t.format(1), "ended_at": t.format(2), "span_data": {"type": "function", "name": "fetch", "input": "{}", "output": "x"},
         "error": {"message": f"401: Incorrect API key provided: {key}", "data": None}},
    ]  # fmt: skip
    f = tmp_path / "export.json"
    f.write_text(json.dumps({"data": items}))
    for keep in (False, True):
        (tr,) = list(importers.load(f, "openai-agents", keep_content=keep))
        errors = [e.attrs["error"] for e in tr.events if (e.attrs or {}).get("error")]
        assert errors and all(x == "401: Incorrect API key provided: [REDACTED]" for x in errors)
        assert key not in dumps(tr).decode()


def test_otlp_round_trip_keeps_content_only_redacted(tmp_path: Path) -> None:
    """An orchestrace trace exported to OTLP with its content comes back like any other log."""
    from orchestrace.core.io import loads
    from orchestrace.export import get_exporter

    key = CORPUS["github"][1][0]
    trace = {
        "trace_id": "t-otlp", "task_id": "x", "system": "demo", "topology": "centralized",
        "rewards": {"team": 1.0}, "costs": {"tokens": 0, "wall_clock_s": 1.0},
        "events": [
            {"id": "e0", "t": 0.0, "type": "message", "agent": "a", "to": "b", "content": f"token {key} here"},
            {"id": "e1", "t": 1.0, "type": "message", "agent": "b", "to": "a", "content": "thanks"},
        ],
        "edges": [{"src": "e0", "dst": "e1", "type": "message"}],
    }  # fmt: skip
    out = tmp_path / "spans.jsonl"
    get_exporter("otlp")([loads(json.dumps(trace))], str(out), include_content="true")
    assert key in out.read_text()
    (kept,) = list(importers.load(out, "otel", keep_content=True))
    assert [e.content for e in kept.events] == ["token [REDACTED] here", "thanks"]
    (plain,) = list(importers.load(out, "otel"))
    assert [e.content for e in plain.events] == [None, None]


def _one_command_log(fmt: str, path: Path, command: str) -> None:
    """A Claude Code session or a Codex rollout whose one tool call runs ``command``."""
    stamp = "2026-03-01T10:00:0{}Z"
    if fmt == "claude-code":
        common = {"sessionId": "s-aws", "cwd": "/srv/app", "version": "2.1.3"}
        call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": command}}
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
        recs = [
            {**common, "type": "user", "uuid": "u1", "timestamp": stamp.format(1), "message": {"role": "user", "content": "configure aws"}},
            {**common, "type": "assistant", "uuid": "a1", "timestamp": stamp.format(2), "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5", "content": [call], "usage": {"input_tokens": 10, "output_tokens": 5}}},
            {**common, "type": "user", "uuid": "r1", "timestamp": stamp.format(3), "message": {"role": "user", "content": [result]}},
        ]  # fmt: skip
    else:
        recs = [
            {"timestamp": stamp.format(0), "type": "session_meta", "payload": {"id": "r-aws", "cwd": "/srv/app", "cli_version": "0.125.0"}},
            {"timestamp": stamp.format(1), "type": "event_msg", "payload": {"type": "user_message", "message": "configure aws"}},
            {"timestamp": stamp.format(2), "type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": command}), "call_id": "call_1"}},
            {"timestamp": stamp.format(3), "type": "response_item", "payload": {"type": "function_call_output", "call_id": "call_1", "output": "ok"}},
        ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")


@pytest.mark.parametrize("sep", ["\t", "\n", " "])
@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_a_bare_aws_pair_in_a_command_is_redacted(fmt: str, sep: str, tmp_path: Path) -> None:
    """A key id then its secret, no label (issue 34): a command is kept as JSON text, where a tab
    or a newline before the secret reads ``\\t`` and the secret looked 41 characters long."""
    rng = random.Random(34)
    key_id = "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    secret = "".join(rng.choice(_B64) for _ in range(40))
    src = tmp_path / ("session.jsonl" if fmt == "claude-code" else "rollout-2026-03-01T10-00-00-r.jsonl")
    _one_command_log(fmt, src, f"printf '%s\\n' {key_id}{sep}{secret} | aws configure import")
    out = tmp_path / "kept.jsonl"
    res = CliRunner().invoke(app, ["import", "--from", fmt, str(src), "-o", str(out), "--keep-content"])
    assert res.exit_code == 0, res.output
    (tr,) = load(out)
    blob = dumps(tr).decode()
    assert "aws configure import" in blob and secret not in blob and key_id not in blob
