"""How many strings of the real agent logs ``--keep-content`` redaction changes, and how fast it is.

Imports every importable log under ``../shared/data`` (Claude Code, Codex, Who&When, ChatDev, ...) with content kept, records each
string handed to the redactor and prints how many it changed, with every change (what was cut
out, in its context) so a reader can tell real secrets from over-redaction. Then the redactor's throughput on all those
strings joined and on adversarial inputs (long identifier runs that repeat a keyword made the
assignment pattern quadratic once: 16 KB took 10 s).

    python bench/redaction_false_positives.py [DATA_DIR]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from orchestrace import importers
from orchestrace.importers import claude_code, staging
from orchestrace.importers.redact import merged_spans


def main(root: Path) -> None:
    seen: list[tuple[str, str]] = []
    plain = staging.redact

    def recording(text: str) -> str:
        out = plain(text)
        seen.append((text, out))
        return out

    staging.redact = recording
    claude_code.redact = recording
    files = importers.plan(importers.walk([str(root)]))
    n_traces = 0
    for f, name in files:
        try:
            n_traces += sum(1 for _ in importers.load(f, name, keep_content=True))
        except Exception as e:  # noqa: BLE001  a bad file is reported by import; here it is skipped
            print(f"skip {f}: {e}", file=sys.stderr)
    changed = [(a, b) for a, b in seen if a != b]
    print(
        f"{len(files)} files, {n_traces} traces, {len(seen)} strings redacted-checked, {len(changed)} changed"
    )
    cuts = [(a[max(0, x - 50) : x], a[x:y]) for a, _ in changed for x, y in merged_spans(a)]
    print(f"{len(cuts)} cuts:")
    for before, cut in cuts:
        print(f"- {before!r} [[{cut[:100]!r}]]")
    joined = "\n".join(a for a, _ in seen)
    adversarial = {
        "real strings joined": joined,
        "'password' x 100k": "password" * 100_000,
        "'a=b ' x 250k": "a=b " * 250_000,
        "1 MB of one letter": "A" * 1_000_000,
        "'-----BEGIN PRIVATE KEY-----' x 20k": "-----BEGIN PRIVATE KEY-----" * 20_000,
    }
    for name, text in adversarial.items():
        t0 = time.process_time()
        plain(text)
        dt = time.process_time() - t0
        print(f"redact {name}: {len(text) / 1e6:.2f} MB in {dt:.2f} s CPU ({len(text) / 1e6 / dt:.2f} MB/s)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data"))
