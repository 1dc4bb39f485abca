"""Secret redaction for ``--keep-content`` and home-path reduction for ``metadata.cwd``.

The detectors are the regex plugins of ``detect-secrets`` (a maintained set: AWS, Azure, GitHub,
GitLab, JWT, npm, OpenAI, private keys, SendGrid, Slack, Stripe, ...), run over whole strings,
plus our own patterns where they miss shapes seen in agent logs: key bodies after a private-key
header, tokens longer than the plugin's fixed length (Stripe), bare ``npm_`` tokens, a bare AWS
secret next to its key id, ``curl -u user:pass``, Authorization headers and ``name=value``
assignments of secret-looking names. A match is replaced by ``[REDACTED]``; what surrounds it
(key names, ``scheme://user:`` and ``@host``, PEM markers) stays, so the text still reads.

Not detected on purpose: high-entropy strings in general (git SHAs, UUIDs, content hashes are
everywhere in agent logs) and public IP addresses.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

MARK = "[REDACTED]"

# Characters a token continues with: a plugin regex that matches a fixed-length prefix
# (Stripe's 24 characters, a JWT up to its payload) is widened over the rest of the token.
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")
_Q = r"(?:\\?[\"'])?"  # an optional quote, also JSON-escaped inside a dumped string
_EDGE = "\"' \t\r\n=:,;()[]{}<>`"

_PLACEHOLDER = re.compile(
    r"(?i)^(?:\$|%|<|\{|\[REDACTED\]|\*{3,}|x{3,}|\.\.\.|none|null|nil|true|false|undefined|"
    r"changeme|your[_-]|os\.environ|process\.env|getenv|env\[)"
)
# an unquoted value that is a name, an attribute or a call: code, not a secret
_CODE_VALUE = re.compile(r"^[A-Za-z_][A-Za-z_.]*(?:\(.*|\[.*)?$")


@lru_cache(maxsize=1)
def _plugin_patterns() -> tuple[re.Pattern[str], ...]:
    """The regexes of the detect-secrets plugins that name a secret by its shape. Left out: the
    keyword-style IBM Cloud, IBM COS, Cloudant and Softlayer plugins (40% of the scan time on agent
    logs; their ``*_api_key = ...`` / ``*_password = ...`` forms are caught by ``_assignment``)."""
    from detect_secrets.plugins import (
        artifactory,
        aws,
        azure_storage_key,
        basic_auth,
        discord,
        github_token,
        gitlab_token,
        jwt,
        mailchimp,
        npm,
        openai,
        pypi_token,
        sendgrid,
        slack,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )

    plugins = (
        artifactory.ArtifactoryDetector,
        aws.AWSKeyDetector,
        azure_storage_key.AzureStorageKeyDetector,
        basic_auth.BasicAuthDetector,
        discord.DiscordBotTokenDetector,
        github_token.GitHubTokenDetector,
        gitlab_token.GitLabTokenDetector,
        jwt.JwtTokenDetector,
        mailchimp.MailchimpDetector,
        npm.NpmDetector,
        openai.OpenAIDetector,
        pypi_token.PypiTokenDetector,
        sendgrid.SendGridDetector,
        slack.SlackDetector,
        square_oauth.SquareOAuthDetector,
        stripe.StripeDetector,
        telegram_token.TelegramBotTokenDetector,
        twilio.TwilioKeyDetector,
    )
    # (the private_key plugin names only the header line; _own_patterns covers the key body)
    return tuple(p for cls in plugins for p in cls.denylist)


@lru_cache(maxsize=1)
def _keyword_names() -> str:
    """Secret-looking names, from detect-secrets' keyword plugin plus token names it lacks."""
    from detect_secrets.plugins.keyword import DENYLIST

    names = [n for n in DENYLIST if n != "pwd"]  # PWD=/home/x is the working directory
    names += ["access_?token", "auth_?token", "refresh_?token", "session_?token"]
    return "|".join(names)


@lru_cache(maxsize=1)
def _own_patterns() -> tuple[re.Pattern[str], ...]:
    """Our patterns; the secret is the group ``s`` (or the whole match without one)."""
    return (
        # private-key blocks (PEM, OpenSSH, PGP; also with escaped \n inside JSON): the body
        # up to the END marker, or to the end of the text when the block is cut off
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?P<s>.*?)"
            r"(?=-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        re.compile(r"PuTTY-User-Key-File-\d+:(?P<s>.*?)(?=Private-MAC:|\Z)", re.S),
        # API keys of LLM providers and hosts the plugins do not know
        re.compile(r"\bsk-(?:ant-|proj-|or-|svcacct-)?[A-Za-z0-9_-]{16,}"),
        re.compile(r"\b[rs]k_(?:live|test)_[0-9a-zA-Z]{16,}"),
        re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
        re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
        re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
        re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
        re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
        re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"),
        re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"),
        re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
        # Azure connection strings
        re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)=(?P<s>[^;\s\"'\\]+)"),
        # curl/wget credentials on the command line
        re.compile(rf"(?:^|\s)(?:-u|--user|--proxy-user)(?:\s+|=)?{_Q}[^\s:\"'\\]+:(?P<s>[^\s\"'\\]+)"),
        # bearer/basic tokens outside a header
        re.compile(r"(?i)\b(?:bearer|basic)\s+(?P<s>(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{16,})"),
    )


@lru_cache(maxsize=1)
def _header_patterns() -> tuple[re.Pattern[str], ...]:
    """Authorization and API-key headers; the value counts when it looks like a key."""
    return (
        re.compile(
            rf"(?i)\b(?:proxy-)?authorization{_Q}\s*[:=]\s*{_Q}"
            r"(?:(?:bearer|basic|token|digest|apikey|bot)\s+)?(?P<s>[^\s\"',;\\]{6,})"
        ),
        re.compile(
            rf"(?i)\bx-(?:api-key|auth-token|goog-api-key){_Q}\s*[:=]\s*{_Q}(?P<s>[^\s\"',;\\]{{6,}})"
        ),
    )


@lru_cache(maxsize=1)
def _assignment() -> re.Pattern[str]:
    """``name = value`` / ``"name": "value"`` for any name of up to 80 characters; the caller
    keeps those whose name is secret-looking. Possessive quantifiers keep it linear: a keyword
    inside the name pattern made long identifier runs quadratic."""
    return re.compile(
        rf"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z0-9_.-]{{1,80}}+)"
        rf"(?P<q1>{_Q})\s*+(?P<op>[:=])\s*+(?P<q2>{_Q})(?P<s>[^\s\"',;\\]{{4,}}+)"
    )


@lru_cache(maxsize=1)
def _secret_name() -> re.Pattern[str]:
    return re.compile(rf"(?i){_keyword_names()}")


_PASSWORD_NAME = re.compile(r"(?i)pass|contrase")
# A token starts after a non-token character or after a JSON escape (a tool's input is kept as
# JSON text, where "AKIA...<tab>secret" reads "AKIA...\\tsecret": a 41-character token otherwise).
_AFTER_ESCAPE = r"(?:(?<=\\[nrt])|(?<![A-Za-z0-9/+]))"
_AWS_ID = re.compile(rf"{_AFTER_ESCAPE}(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{{16}}\b")
_AWS_SECRET = re.compile(rf"{_AFTER_ESCAPE}[A-Za-z0-9/+]{{40}}(?![A-Za-z0-9/+=])")


def _spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for pat in _plugin_patterns():
        for m in pat.finditer(text):
            g = max((i for i in range(1, (pat.groups or 0) + 1) if m.group(i)), default=0)
            a, b = m.span(g)
            while a < b and text[a] in _EDGE:
                a += 1
            while b > a and text[b - 1] in _EDGE:
                b -= 1
            tail = _TOKEN_TAIL.match(text, b)
            b = tail.end() if tail else b
            if b > a:
                spans.append((a, b))
    for pat in _own_patterns():
        for m in pat.finditer(text):
            a, b = m.span("s") if "s" in pat.groupindex else m.span()
            if b > a:
                spans.append((a, b))
    for pat in _header_patterns():
        spans += [m.span("s") for m in pat.finditer(text) if _looks_like_key(m.group("s"))]
    secret_name, assignment = _secret_name(), _assignment()
    pos = 0
    while m := assignment.search(text, pos):
        if not secret_name.search(m.group("name")):
            pos = m.start("s")  # the value may hold the next assignment: "cmd": "PGPASSWORD=x"
            continue
        if _is_secret_value(text, m):
            spans.append(m.span("s"))
        pos = m.end()
    # a bare 40-character AWS secret near its key id (CSV exports, `aws configure list`)
    for m in _AWS_ID.finditer(text):
        lo, hi = max(0, m.start() - 200), m.end() + 200
        for s in _AWS_SECRET.finditer(text, lo, hi):
            v = s.group()
            if any(c.isupper() for c in v) and any(c.islower() for c in v):
                spans.append(s.span())
    return spans


def _looks_like_key(value: str) -> bool:
    """Random-looking: letters with digits, or long and of mixed case (not a word, not a name)."""
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return len(value) >= 8 and ((letters and digits) or (len(value) >= 20 and mixed))


def _is_secret_value(text: str, m: re.Match[str]) -> bool:
    """The value of a ``name = value`` match is a secret, not code, a placeholder or prose."""
    value, name = m.group("s"), m.group("name")
    if _PLACEHOLDER.match(value):
        return False
    if m.group("q2"):
        if text[m.end("s") : m.end("s") + 1] not in ('"', "'", "\\"):
            return False  # the quoted string goes on past a space: a command or a sentence
    elif not (m.group("op") == "=" and name.isupper() and not m.group("q1")):
        if _CODE_VALUE.match(value):  # an unquoted name, attribute or call (env vars excepted)
            return False
    return bool(_PASSWORD_NAME.search(name)) or _looks_like_key(value)


def merged_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of ``text`` that hold secrets, sorted and without overlaps."""
    merged: list[tuple[int, int]] = []
    for a, b in sorted(_spans(text)):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def redact(text: str) -> str:
    """Text with API keys, tokens, private keys and passwords replaced by ``[REDACTED]``."""
    out: list[str] = []
    pos = 0
    for a, b in merged_spans(text):
        out += [text[pos:a], MARK]
        pos = b
    out.append(text[pos:])
    return "".join(out)


_HOME = re.compile(
    r"^(?:/home/[^/]+|/Users/[^/]+|/var/home/[^/]+|/root|/mnt/[a-z]/Users/[^/]+|[A-Za-z]:[\\/]Users[\\/][^\\/]+)"
    r"(?=$|[\\/])"
)


def home_to_tilde(path: str) -> str:
    """``/home/alice/x`` -> ``~/x``: a working directory without the user's name."""
    return _HOME.sub("~", path, count=1)


def tilde_home(meta: Any) -> None:
    """In place: ``cwd`` values of the metadata (top level and one object down) with ``~`` for
    the home directory, and a Claude Code ``project`` (the cwd with ``/`` as ``-``) to match."""
    if not isinstance(meta, dict):
        return
    for d in [meta, *(v for v in meta.values() if isinstance(v, dict))]:
        cwd = d.get("cwd")
        if not isinstance(cwd, str):
            continue
        d["cwd"] = home_to_tilde(cwd)
        home = _HOME.match(cwd)
        project = d.get("project")
        if home and isinstance(project, str):
            encoded = re.sub(r"[^A-Za-z0-9]", "-", home.group())
            if project.startswith(encoded):
                d["project"] = "~" + project[len(encoded) :]
