"""Loaders for the real public outcomes behind RetryStop and Delegate (read from ``data_dir()``).

Nothing is copied into the repository: every loader reads ``$ORCHESTRACE_DATA`` (or the
``shared/data`` folder beside the checkout) or an explicit ``root``, and raises an
``OrchestraceError`` naming the missing file when the data is not there.

RetryStop families (one :class:`RetryTask` per task, attempts in the order they were made):

- ``alfworld``: Reflexion on ALFWorld, 134 environments x 15 trials (``is_success`` per trial; the
  failed trial t left reflection t in the environment's memory).
- ``humaneval``: Reflexion on HumanEval, 164 tasks; a task made ``len(reflections) + 1`` attempts
  and the last one passed the hidden tests iff ``is_solved`` (the loop ends when the model's own
  tests pass or after 10 attempts, so an unsolved task can end early).
- ``game24``: GPT-4 chain-of-thought on Game of 24 (puzzles 900-999), 100 samples each with the
  verifier's 0/1 flag; per-sample USD = the puzzle's logged cost (the increase of the running
  ``usage_so_far``, whose counter restarts once in the log) split by sample length.

Delegate data (:class:`RouteData`): a quality matrix [queries x models] and a USD cost matrix from
the FrugalGPT price table (``config/serviceinfo.json``) applied to token counts estimated as
characters / 4. Models without an entry in that table use the named entry of a model of the same
size class; :data:`PRICE_MAP` says which, and ``RouteData.price_source`` records it per model.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.errors import OrchestraceError
from ..core.paths import data_dir

RETRY_FAMILIES = ("alfworld", "humaneval", "game24")
ROUTE_SOURCES = ("gsm8k", "mmlu", "alpaca")
CHARS_PER_TOKEN = 4.0


def _root(root: str | Path | None) -> Path:
    return Path(root) if root is not None else data_dir()  # type: ignore[return-value]


def _need(p: Path, what: str) -> Path:
    if not p.exists():
        raise OrchestraceError(
            "OT660",
            f"{what} not found; point ORCHESTRACE_DATA (or --data) at the public data folder",
            path=str(p),
        )
    return p


def _text(p: Path, what: str) -> str:
    """The file as UTF-8 text; a file that is not (or a folder there) is OT661 naming it."""
    try:
        return _need(p, what).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise OrchestraceError("OT661", f"{what} is not UTF-8 text: {e}", path=str(p)) from None
    except OSError as e:
        raise OrchestraceError("OT661", f"cannot read the {what}: {e.strerror or e}", path=str(p)) from None


@contextmanager
def _damaged(what: str, root: str | Path | None) -> Iterator[None]:
    """A data set whose files parse but do not hold what its reader expects (a missing key, a
    list where a record should be) is OT661 naming it; it was a KeyError or TypeError, exit 3."""
    try:
        yield
    except OrchestraceError:
        raise
    except (KeyError, IndexError, TypeError, AttributeError, ValueError, csv.Error) as e:
        raise OrchestraceError(
            "OT661",
            f"the {what} data is not in the expected form ({type(e).__name__}: {e})",
            path=str(_root(root)),
        ) from None


def _read_json(p: Path, what: str) -> object:
    text = _text(p, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise OrchestraceError("OT661", f"{what} is not valid JSON: {e}", path=str(p)) from None


# ----------------------------------------------------------------------------- RetryStop


@dataclass
class RetryTask:
    """Replayable attempts of one task: ``success[t]``, ``content[t]`` (what the failed attempt left
    behind: a reflection or the sample itself) and ``cost[t]`` (family units)."""

    id: str
    family: str
    success: list[bool]
    content: list[str]
    cost: list[float]

    @property
    def first_success(self) -> int | None:
        return next((i for i, s in enumerate(self.success) if s), None)


def load_alfworld(root: str | Path | None = None) -> list[RetryTask]:
    base = _root(root) / "reflexion" / "alfworld_runs" / "root" / "reflexion_run_logs"
    trials = []
    for k in range(15):
        d = _read_json(base / f"env_results_trial_{k}.json", f"ALFWorld trial {k} results")
        if not isinstance(d, list):
            raise OrchestraceError("OT661", "expected a list of environments", path=str(base))
        trials.append(d)
    out = []
    for i, env in enumerate(trials[-1]):
        success = [bool(trials[k][i].get("is_success")) for k in range(len(trials))]
        memory = [str(m).strip() for m in env.get("memory") or []]
        f = next((t for t, s in enumerate(success) if s), len(success))
        success = success[: f + 1]
        content = [memory[t] if t < len(memory) else "" for t in range(len(success))]
        if f < len(content):
            content[f] = "success"
        out.append(
            RetryTask(str(env.get("name", f"env_{i}")), "alfworld", success, content, [1.0] * len(success))
        )
    return out


def load_humaneval(root: str | Path | None = None) -> list[RetryTask]:
    p = _root(root) / "reflexion" / "programming_runs" / "root" / "reflexion_humaneval_py_pass_at_1"
    p = _need(p / "reflexion_humaneval_py_pass_at_1.jsonl", "Reflexion HumanEval log")
    out = []
    for ln, line in enumerate(_text(p, "Reflexion HumanEval log").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue  # truncated line in a real log: skip it
        refl = [str(x).strip() for x in r.get("reflections") or []]
        n = len(refl) + 1
        success = [False] * (n - 1) + [bool(r.get("is_solved"))]
        content = refl + ["success" if success[-1] else "gave up: own tests passed or attempts exhausted"]
        out.append(RetryTask(str(r.get("task_id", f"line{ln}")), "humaneval", success, content, [1.0] * n))
    if not out:
        raise OrchestraceError("OT661", "no task in the HumanEval log", path=str(p))
    return out


def load_game24(root: str | Path | None = None, kind: str = "cot") -> list[RetryTask]:
    name = {"cot": "naive_cot", "standard": "naive_standard"}.get(kind)
    if name is None:
        raise OrchestraceError("OT662", f"unknown Game-of-24 log {kind!r} (cot, standard)")
    p = (
        _root(root)
        / "tree-of-thoughts"
        / "logs"
        / "game24"
        / f"gpt-4_0.7_{name}_sample_100_start900_end1000.json"
    )
    d = _read_json(p, "Game-of-24 sample log")
    if not isinstance(d, list):
        raise OrchestraceError("OT661", "expected a list of puzzles", path=str(p))
    out, prev = [], 0.0
    for x in d:
        ys = [str(y) for y in x["ys"]]
        flags = [bool(i["r"]) for i in x["infos"]] if "infos" in x else [bool(a) for a in x["accs"]]
        total = float(x["usage_so_far"]["cost"])
        spent, prev = (total - prev if total >= prev else total), total  # the log restarts its counter once
        lens = np.array([max(len(y), 1) for y in ys], dtype=float)
        cost = (spent * lens / lens.sum()).tolist()
        out.append(RetryTask(f"game24-{x['idx']}", "game24", flags, ys, cost))
    return out


def load_retry(family: str, root: str | Path | None = None) -> list[RetryTask]:
    """One RetryStop family by name (``alfworld``, ``humaneval``, ``game24``, ``game24-standard``)."""
    loaders = {
        "alfworld": lambda: load_alfworld(root),
        "humaneval": lambda: load_humaneval(root),
        "game24": lambda: load_game24(root, "cot"),
        "game24-standard": lambda: load_game24(root, "standard"),
    }
    if family not in loaders:  # before the data folder is looked for: the name is the mistake
        raise OrchestraceError(
            "OT662", f"unknown retry family {family!r} (alfworld, humaneval, game24, game24-standard)"
        )
    with _damaged(family, root):
        return loaders[family]()


# ----------------------------------------------------------------------------- prices


#: Delegate model -> (FrugalGPT provider/model whose price we use, "exact" or "proxy: why").
PRICE_MAP: dict[str, tuple[str, str]] = {
    "gpt-4-1106-preview": ("openaichat/gpt-4-turbo", "exact"),
    "gpt4_1106_preview": ("openaichat/gpt-4-turbo", "exact"),
    "gpt4_0613_concise": ("openaichat/gpt-4", "exact"),
    "gpt-3.5-turbo-1106": ("openaichat/gpt-3.5-turbo", "exact"),
    "gpt-3.5-turbo-0301": ("openaichat/gpt-3.5-turbo", "exact"),
    "text_davinci_003": ("openai/text-davinci-003", "exact"),
    "claude": ("anthropic/claude-1", "exact"),
    "claude-2": ("anthropic/claude-1", "proxy: claude-2 was priced as claude-1"),
    "claude-2.1": ("anthropic/claude-1", "proxy: claude-2.1 was priced as claude-1"),
    "claude-instant-1.2": ("anthropic/claude-instant-1", "exact"),
    "gemma-2b-it": ("togetherai/google/gemma-2b-it", "exact"),
    "gemma-7b-it": ("togetherai/google/gemma-2-9b-it", "proxy: same size class"),
    "FuseChat-Gemma-2-9B-Instruct": ("togetherai/google/gemma-2-9b-it", "proxy: fine-tune of gemma-2-9b"),
    "FuseChat-Llama-3.1-8B-Instruct": (
        "togetherai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
        "proxy: fine-tune of Llama-3.1-8B",
    ),
    "FuseChat-Qwen-2.5-7B-Instruct": (
        "togetherai/mistralai/Mistral-7B-Instruct-v0.3",
        "proxy: 7B size class",
    ),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (
        "togetherai/meta-llama/Llama-3-70b-chat-hf",
        "proxy: no Mixtral entry; a larger open model (upper bound)",
    ),
    "Mixtral-8x7B-Instruct-v0.1_concise": (
        "togetherai/meta-llama/Llama-3-70b-chat-hf",
        "proxy: no Mixtral entry; a larger open model (upper bound)",
    ),
    "vicuna-13b-v1.5": ("togetherai/google/gemma-2-9b-it", "proxy: 13B size class"),
    "vicuna-7b-v1.5": ("togetherai/mistralai/Mistral-7B-Instruct-v0.3", "proxy: 7B size class"),
    "humpback-llama2-70b": ("togetherai/meta-llama/Llama-3-70b-chat-hf", "proxy: 70B size class"),
}

#: The AlpacaEval models Delegate routes among by default: a cheap-to-expensive ladder.
ALPACA_DEFAULT_MODELS = (
    "gemma-2b-it",
    "FuseChat-Llama-3.1-8B-Instruct",
    "FuseChat-Gemma-2-9B-Instruct",
    "Mixtral-8x7B-Instruct-v0.1_concise",
    "gpt-3.5-turbo-1106",
    "claude-2.1",
    "gpt4_1106_preview",
)


def load_prices(root: str | Path | None = None) -> dict[str, tuple[float, float]]:
    """``provider/model -> (USD per input token, USD per output token)`` from FrugalGPT."""
    d = _read_json(_root(root) / "frugalgpt" / "config" / "serviceinfo.json", "FrugalGPT price table")
    out = {}
    for prov, models in d.items():  # type: ignore[union-attr]
        for m, v in models.items():
            out[f"{prov}/{m}"] = (float(v.get("cost_input", 0.0)), float(v.get("cost_output", 0.0)))
    return out


def price_of(model: str, prices: dict[str, tuple[float, float]]) -> tuple[tuple[float, float], str]:
    if model not in PRICE_MAP:
        raise OrchestraceError(
            "OT663", f"no price for model {model!r}; known: {', '.join(sorted(PRICE_MAP))}"
        )
    key, why = PRICE_MAP[model]
    if key not in prices:
        raise OrchestraceError("OT663", f"price table lacks {key!r} (needed for {model!r})")
    return prices[key], f"{key} ({why})"


# ----------------------------------------------------------------------------- Delegate


@dataclass
class RouteData:
    """Queries x models: ``quality`` in [0, 1] and ``cost`` in USD, both real per-query outcomes."""

    name: str
    ids: list[str]
    texts: list[str]
    groups: list[str]
    models: list[str]
    quality: np.ndarray  # [Q, M]
    cost: np.ndarray  # [Q, M]
    price_source: dict[str, str] = field(default_factory=dict)
    responses: list[list[str]] | None = None  # [Q][M] the models' logged answers, when published

    def subset(self, idx: np.ndarray) -> RouteData:
        idx = np.asarray(idx)
        return RouteData(
            self.name,
            [self.ids[i] for i in idx],
            [self.texts[i] for i in idx],
            [self.groups[i] for i in idx],
            self.models,
            self.quality[idx],
            self.cost[idx],
            self.price_source,
            None if self.responses is None else [self.responses[i] for i in idx],
        )


def _tokens(text: str) -> float:
    return max(1.0, len(text) / CHARS_PER_TOKEN)


def _contaminated(path: Path) -> set[str]:
    if not path.exists():
        return set()
    out = set()
    for line in _text(path, "RouteLLM contaminated prompts").splitlines():
        try:
            out.add(str(json.loads(line).get("eval_prompt", "")).strip())
        except json.JSONDecodeError:
            continue
    return out


def _route_costs(
    models: list[str], tin: np.ndarray, tout: np.ndarray, root: str | Path | None
) -> tuple[np.ndarray, dict[str, str]]:
    prices = load_prices(root)
    cost = np.zeros((len(tin), len(models)))
    src = {}
    for j, m in enumerate(models):
        (pi, po), src[m] = price_of(m, prices)
        cost[:, j] = tin[:, j] * pi + tout[:, j] * po
    return cost, src


def load_routellm(bench: str = "gsm8k", root: str | Path | None = None) -> RouteData:
    """GPT-4-1106 vs Mixtral-8x7B correctness (RouteLLM evals), contaminated prompts removed.

    Output tokens: the logged responses for GSM8K; one token (the option letter) for MMLU."""
    base = _root(root) / "routellm" / "routellm" / "evals" / bench
    models = ["mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"]
    csv.field_size_limit(1 << 30)
    if bench == "gsm8k":
        files = [_need(base / "gsm8k_responses.csv", "RouteLLM GSM8K responses")]
    elif bench == "mmlu":
        files = sorted(_need(base / "responses", "RouteLLM MMLU responses").glob("mmlu_*.csv"))
    else:
        raise OrchestraceError("OT662", f"unknown RouteLLM benchmark {bench!r} (gsm8k, mmlu)")
    bad = _contaminated(base / "contaminated_prompts.jsonl")
    ids, texts, groups, qual, tin, tout, resp = [], [], [], [], [], [], []
    for f in files:
        group = f.stem.removeprefix("mmlu_") if bench == "mmlu" else "gsm8k"
        for i, row in enumerate(csv.DictReader(io.StringIO(_text(f, "RouteLLM responses"), newline=""))):
            prompt = row.get("prompt") or ""
            if not prompt or prompt.strip() in bad or any(m not in row for m in models):
                continue
            ids.append(f"{bench}-{group}-{i}")
            texts.append(prompt)
            groups.append(group)
            qual.append([1.0 if row[m] == "True" else 0.0 for m in models])
            tin.append([_tokens(prompt)] * len(models))
            tout.append(
                [_tokens(row.get(f"{m}_response") or "x") if bench == "gsm8k" else 1.0 for m in models]
            )
            resp.append([row.get(f"{m}_response") or "" for m in models])
    if not ids:
        raise OrchestraceError("OT661", "no usable prompt in the RouteLLM files", path=str(base))
    cost, src = _route_costs(models, np.array(tin), np.array(tout), root)
    responses = resp if bench == "gsm8k" else None
    return RouteData(bench, ids, texts, groups, models, np.array(qual), cost, src, responses)


def load_alpaca(
    models: list[str] | tuple[str, ...] | None = None, root: str | Path | None = None
) -> RouteData:
    """AlpacaEval 2 per-instruction preference vs GPT-4-turbo (1..2, mapped to quality 0..1);
    input tokens from the instruction text, output tokens from each model's output length."""
    base = _root(root) / "alpaca-eval"
    models = list(models or ALPACA_DEFAULT_MODELS)
    ref = _read_json(
        base / "results" / "gpt4_1106_preview" / "model_outputs.json", "AlpacaEval reference outputs"
    )
    instr = [str(r.get("instruction", "")) for r in ref]  # type: ignore[union-attr]
    pref: dict[tuple[str, int], tuple[float, float, str]] = {}
    p = _need(base / "DERIVED_weighted_gpt4turbo_preference_matrix.csv", "AlpacaEval preference matrix")
    for row in csv.DictReader(io.StringIO(_text(p, "AlpacaEval preference matrix"), newline="")):
        try:
            pref[(row["model"], int(row["instruction_idx"]))] = (
                float(row["preference_vs_gpt4_1106_preview"]),
                float(row["output_chars"] or 0.0),
                row["dataset"],
            )
        except (KeyError, ValueError):
            continue
    known = {m for m, _ in pref}
    missing = [m for m in models if m not in known]
    if missing:
        raise OrchestraceError(
            "OT663", f"models not in the AlpacaEval matrix: {', '.join(missing)}", path=str(p)
        )
    n = len(instr)
    keep = [i for i in range(n) if all((m, i) in pref for m in models)]
    qual = np.array([[pref[(m, i)][0] - 1.0 for m in models] for i in keep]).clip(0.0, 1.0)
    tin = np.array([[_tokens(instr[i])] * len(models) for i in keep])
    tout = np.array([[max(1.0, pref[(m, i)][1] / CHARS_PER_TOKEN) for m in models] for i in keep])
    cost, src = _route_costs(models, tin, tout, root)
    groups = [pref[(models[0], i)][2] for i in keep]
    return RouteData(
        "alpaca", [f"alpaca-{i}" for i in keep], [instr[i] for i in keep], groups, models, qual, cost, src
    )


def load_route(source: str, root: str | Path | None = None, models: list[str] | None = None) -> RouteData:
    if source not in ("gsm8k", "mmlu", "alpaca"):
        raise OrchestraceError("OT662", f"unknown Delegate source {source!r} (gsm8k, mmlu, alpaca)")
    with _damaged(source, root):
        return load_alpaca(models, root) if source == "alpaca" else load_routellm(source, root)


_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())
