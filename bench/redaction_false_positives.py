"""How many strings of the real agent logs ``--keep-content`` redaction changes.

Imports every importable log under ``../shared/data`` (Claude Code, Codex, Who&When, ChatDev, ...) with content kept, records each
string handed to the redactor and prints how many it changed, with every change (what was cut
out, in its context) so a reader can tell real secrets from over-redaction.

    python bench/redaction_false_positives.py [DATA_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrace import importers
from orchestrace.importers import _common, claude_code
from orchestrace.importers.redact import merged_spans


def main(root: Path) -> None:
    seen: list[tuple[str, str]] = []
    plain = _common.redact

    def recording(text: str) -> str:
        out = plain(text)
        seen.append((text, out))
        return out

    _common.redact = recording
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


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data"))
