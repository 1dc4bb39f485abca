"""check_value's pointer-free first walk finds exactly the violations the pointer walk reports."""

import random

from orchestrace.core import limits
from orchestrace.core.limits import MAX_DEPTH, LimitViolation, check_value


def _tree(rng: random.Random, depth: int) -> object:
    k = rng.random()
    if depth > MAX_DEPTH + 5 or k < 0.3:
        return rng.choice([1, 2**63 - 1, 2**63, -(2**63) - 1, True, None, 1.5, "text"])
    if k < 0.65:
        return [_tree(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "b/c", "d~e"]): _tree(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _nested(rng: random.Random, levels: int) -> object:
    v: object = 1
    for _ in range(levels):
        v = [v] if rng.random() < 0.5 else {"k": v}
    return v


def test_same_result_as_the_pointer_walk() -> None:
    rng = random.Random(20)
    for i in range(3000):
        value = _tree(rng, 0) if i % 2 else _nested(rng, rng.randint(MAX_DEPTH - 8, MAX_DEPTH + 4))
        depth = rng.randint(0, 4)
        assert check_value(value, "/x", depth) == limits._first_violation(value, "/x", depth)


def test_examples() -> None:
    assert check_value({"a": [1, {"b": 2**63}]}, "/m") == LimitViolation(
        "/m/a/1/b", f"integer {2**63} is outside the signed 64-bit range"
    )
    assert check_value({"a": True, "b": [2**63 - 1, "x"]}) is None
    deep = _nested(random.Random(0), MAX_DEPTH + 1)
    keys, v = [], deep
    for _ in range(MAX_DEPTH):  # down to the container at depth 64 (the root is depth 0)
        keys.append("k" if isinstance(v, dict) else "0")
        v = v["k"] if isinstance(v, dict) else v[0]  # type: ignore[index]
    want = LimitViolation("/" + "/".join(keys), f"nested deeper than {MAX_DEPTH} levels of arrays/objects")
    assert check_value(deep) == want
    assert check_value(_nested(random.Random(0), MAX_DEPTH)) is None  # depths 0..63


def test_long_integer_scan_flags_numbers_not_digits_in_strings() -> None:
    long_numbers = [
        b"12345678901234567890",
        b"\xef\xbb\xbf -12345678901234567890",
        b'{"a": 12345678901234567890}',
        b'{"a":-1234567890123456789}',
        b"[1,\n 1234567890123456789]",
        b"[1234567890123456789]",
        b'{"h": "sha256:1234567890123456789"}',  # a run after ":" in a string: checked, to be safe
    ]
    no_long_number = [
        b'{"a": "x1234567890123456789"}',
        b'{"h": "ab1234567890123456789012"}',  # a hex digest
        b'{"a": 1.12345678901234567890}',  # fraction digits: a float, not an integer
        b'{"a": 123456789012345678}',  # 18 digits always fit
    ]
    assert all(limits.needs_exact_check(t) for t in long_numbers)
    assert not any(limits.needs_exact_check(t) for t in no_long_number)


def test_long_integer_scan_of_large_texts_finds_every_run() -> None:
    """Texts past 16 KB are scanned by array blocks of 64 KB: a run of 19 digits is found at
    either end of the text and across a block edge; 18 digits are never a run."""
    size = 3 * 65536 + 7
    filler = b'{"a": "xy", "b": [true, null]}, ' * (size // 32 + 1)  # no digits
    for start in (0, 1, 65517, 65518, 65535, 65536, 131071, size - 25, size - 19):
        for length, found in ((18, False), (19, True), (25, True)):
            if start + length > size:
                continue
            text = filler[:start] + b"7" * length + filler[start + length : size]
            assert len(text) == size
            assert limits._has_digit_run(text) is found, (start, length)
    edge = filler[:65530] + b"[" + b"7" * 19 + b"]" + filler[:65536]
    assert limits.needs_exact_check(edge)
    assert not limits.needs_exact_check(edge.replace(b"[7", b"x7"))  # inside a word: no number
