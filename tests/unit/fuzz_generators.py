"""Hostile inputs for the fuzz tests (``test_fuzz_inputs.py``): a seeded generator, no dependency.

:class:`Hostile` makes option keys, option values and JSON documents of the kinds that escaped
the connector's errors before (issue 27, item 3): generated keys (real option names in any case,
the ``kafka.``/``offsets.table.storage.`` prefixes with anything after them, random Unicode),
non-ASCII digits (``²``, ``٣``, ``１``), numbers too large for a float, an int64 or Python's
int-to-str limit, NaN and infinities, deep nesting (as text, deeper than the JSON parser's
recursion; as objects, as deep as a parser can return), huge strings and wide objects, regular
expressions Python warns about or cannot compile, and values of the wrong JSON type.

The number of examples per test is ``KAFKA_GROUP_FUZZ_EXAMPLES`` (default: a CI-sized run of a
few seconds in all) and the seed ``KAFKA_GROUP_FUZZ_SEED`` (fixed by default, so CI is
reproducible); a failure names the seed and the example's index to replay it.
"""

from __future__ import annotations

import json
import os
import random
import string
from typing import Any, Callable, List, Optional, Sequence, Type

#: Examples per fuzz test (``KAFKA_GROUP_FUZZ_EXAMPLES=100000`` for a long run on demand).
EXAMPLES = int(os.environ.get("KAFKA_GROUP_FUZZ_EXAMPLES", "150"))
#: The base seed (fixed in CI).
SEED = os.environ.get("KAFKA_GROUP_FUZZ_SEED", "27")

NON_ASCII_DIGITS = ["²", "³", "¹", "٣", "١٢", "１２", "߁", "൧", "໒", "𝟗", "⁹", "½", "Ⅻ", "٠"]
NUMBERS = ["0", "-0", "1", "-1", "-2", "-3", "2147483647", "2147483648", "9223372036854775807",
           "9223372036854775808", "-9223372036854775809", "1e3", "1.5", "0.0001", "1e999", "-1e999", "1_000",
           "0x10", "0o7", "+5", " 7 ", "NaN", "nan", "inf", "-inf", "Infinity", "-Infinity", "1e-999", "٣"]
UNITS = ["ms", "s", "m", "h", "d", "days", "minutes", "MS", "S", "sec", "µs", "", " ms", "ns", "weeks"]
WORDS = ["", " ", "\t", "\n", "true", "false", "TRUE", "tRuE", "yes", "earliest", "latest", "EARLIEST", "error",
         "orders", "orders,payments", ",", ",,", "orders:10,audit:1", "orders:", ":1", "orders:x", "fair",
         "proportional", "packed", "partition", "read_committed", "read_uncommitted", "classic", "consumer",
         "mod:func", "os:system", "a:b:c", ":", "127.0.0.1:9092", "null", "{}", "[]", '""', "..", "/", "\x00",
         "\ud800", "é", "注文", "\u202e", "orders-.*", ".*", "(", ")", "[", "[[a]", "[a-[b]]", "[a&&b]", "[a||b]",
         "[a--b]", "[a~~b]", "a{99999999999999999999}", "a{4294967296}", "(?P<x>", "(?<=a+)b", "\\", "*",
         "(?i)orders", "x" * 250, "%s%n", "{0}", "${jndi:x}", "$(id)"]
REGEXES = ["[[a]", "[a-[b]]", "[a&&b]", "[a||b]", "[a--b]", "[a~~b]", "[]]", "(?x)[ #]", "a{99999999999999999999}",
           "a{4294967296}", "(?P<x>a)(?P=y)", "(" * 2000 + ")" * 2000, "(?" , "\\p{L}", "\\N{BOGUS}", "[\\d-z]"]
MEMBER_KEYS = ["orders", "payments", "0", "1", "-1", "01", " 2", "@group", "@offsetsTable", "@flow", "@member",
               "@bogus", "", "paused", "pausedTopics", "held", "control", "op", "topic", "partitions",
               "9" * 5000] + NON_ASCII_DIGITS
PREFIXES = ["kafka.", "offsets.table.storage.", "flow.", "fetch.", "kafkaconsumer.", "@", ""]


class Hostile:
    """A generator of hostile values, seeded: the same ``(seed, index)`` gives the same example."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    # -- text ----------------------------------------------------------------------------

    def number_text(self) -> str:
        r = self.rng
        kind = r.randrange(6)
        if kind == 0:
            return r.choice(NUMBERS)
        if kind == 1:
            return r.choice(NON_ASCII_DIGITS) * r.randint(1, 3)
        if kind == 2:
            return "9" * r.choice([19, 20, 40, 309, 400, 4301, 5000])
        if kind == 3:
            return str(r.randint(-(1 << 70), 1 << 70))
        if kind == 4:
            return r.choice(["", "-", "+"]) + f"{r.random():.6f}e{r.randint(-400, 400)}"
        return r.choice(NUMBERS) + r.choice(NON_ASCII_DIGITS)

    def deep_text(self) -> str:
        r = self.rng
        depth = r.choice([100, 999, 1001, 3000, 3000, 100_000])
        opener = r.choice(["[", "{\"a\":", "{\"orders\":", "[[", "{\"@flow\":"])
        closer = {"[": "]", "{\"a\":": "}", "{\"orders\":": "}", "[[": "]]", "{\"@flow\":": "}"}[opener]
        inner = r.choice(["1", "null", "[]", "{}", "\"x\""])
        return opener * depth + (inner + closer * depth if r.random() < 0.5 else "")

    def text(self) -> str:
        """Any string: a value of some option, a JSON text, a number, deep or huge."""
        r = self.rng
        kind = r.randrange(12)
        if kind == 0:
            return r.choice(WORDS)
        if kind == 1:
            return self.number_text()
        if kind == 2:
            return self.number_text() + r.choice(UNITS)
        if kind == 3:
            return self.deep_text()
        if kind == 4:
            return self.json_text()
        if kind == 5:
            return r.choice(REGEXES)
        if kind == 6:
            return "".join(chr(r.choice([r.randrange(32, 127), r.randrange(0x80, 0x3000), r.randrange(0, 32),
                                         r.randrange(0xD800, 0xE000), r.randrange(0x10000, 0x10FFFF)]))
                           for _ in range(r.randrange(1, 30)))
        if kind == 7:
            return r.choice(WORDS) * r.choice([1000, 1000, 1000, 20_000])
        if kind == 8:
            return ",".join(self.number_text() if r.random() < 0.3 else r.choice(WORDS) for _ in range(r.randrange(5)))
        if kind == 9:
            return "".join(r.choice(string.printable) for _ in range(r.randrange(40)))
        if kind == 10:
            return r.choice(["earliest", "latest", "orders", "orders:1"]) + r.choice(NON_ASCII_DIGITS + ["\x00", " "])
        return json.dumps(self.json_value(), ensure_ascii=r.random() < 0.5)

    def json_text(self) -> str:
        """JSON text (or nearly): valid documents with hostile leaves, and broken ones."""
        r = self.rng
        text = json.dumps(self.json_value(), allow_nan=True)
        kind = r.randrange(5)
        if kind == 0:
            return text[: r.randrange(len(text) + 1)]  # cut short
        if kind == 1:  # a number no float or int64 holds, where JSON allows one
            return text.replace("1", self.number_text().strip() or "1", 1) if "1" in text else text
        if kind == 2:
            return self.deep_text()
        return text

    def key(self) -> str:
        """An option key: a real one in any case, a prefix with anything after it, or anything."""
        from kafka_group.config.option_catalog import OPTIONS

        r = self.rng
        kind = r.randrange(6)
        if kind <= 1:
            name = r.choice(OPTIONS).name
            return "".join(c.upper() if r.random() < 0.3 else c for c in name)
        if kind == 2:
            return r.choice(PREFIXES) + r.choice([self.text()[:50], r.choice(WORDS), "group.id", "sasl.password",
                                                  "enable.auto.commit", "group.protocol", "AWS_REGION"])
        if kind == 3:
            return r.choice(WORDS)
        if kind == 4:
            return self.text()[:200]
        return r.choice(["endingOffsets", "groupIdPrefix", "kafka.consumer.cache.enabled", "path", "bogus",
                         "subscribepatern", "startingoffsets", "x" * 100_000])

    # -- JSON values ---------------------------------------------------------------------

    def scalar(self) -> Any:
        r = self.rng
        kind = r.randrange(9)
        if kind == 0:
            return r.randint(-5, 50)
        if kind == 1:
            return r.choice([2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, 2**100, -(2**63) - 1, -2, -1])
        if kind == 2:
            return r.choice([float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 0.5, 1.0])
        if kind == 3:
            return r.choice([True, False, None])
        if kind == 4:
            return r.choice(WORDS)
        if kind == 5:
            return r.choice(NON_ASCII_DIGITS + ["0", "1", "01", " 2", "-1", "1e3", "9" * 5000])
        if kind == 6:
            return self.text()[:100]
        if kind == 7:
            return r.randint(0, 1 << 40)
        return r.choice(["orders", "0", "x"])

    def member_key(self) -> str:
        r = self.rng
        if r.random() < 0.1:
            return self.text()[:30]
        return r.choice(MEMBER_KEYS)

    def json_value(self, depth: int = 0) -> Any:
        """A JSON-able value: scalars, lists, objects with generated keys, some deep or wide."""
        r = self.rng
        kind = r.randrange(10 if depth < 4 else 1)
        if kind == 0 or depth > 6:
            return self.scalar()
        if kind <= 3:
            return [self.json_value(depth + 1) for _ in range(r.randrange(4))]
        if kind <= 7:
            return {self.member_key(): self.json_value(depth + 1) for _ in range(r.randrange(4))}
        if kind == 8:
            return self.deep_value(r.choice([50, 400, 900]))
        wide: Any = {str(i): [i, i + 1] for i in range(r.choice([1000, 5000]))}  # huge, cheap to build
        wide[self.member_key()] = self.scalar()
        return wide

    def deep_value(self, depth: int) -> Any:
        """A value nested ``depth`` levels (built without recursion)."""
        value: Any = self.rng.choice([1, "x", None, [], {}])
        for _ in range(depth):
            value = [value] if self.rng.random() < 0.5 else {self.rng.choice(["orders", "0", "paused"]): value}
        return value

    def like(self, good: Any) -> Any:
        """``good`` with one part replaced by a hostile value (so parsing gets past the first checks)."""
        r = self.rng
        if isinstance(good, dict) and good and r.random() < 0.8:
            copy = dict(good)
            key = r.choice(list(copy))
            if r.random() < 0.2:
                copy[self.member_key()] = copy.pop(key)
            else:
                copy[key] = self.like(copy[key])
            return copy
        if isinstance(good, list) and good and r.random() < 0.8:
            copy_list = list(good)
            i = r.randrange(len(copy_list))
            copy_list[i] = self.like(copy_list[i])
            return copy_list
        return self.json_value(depth=r.randrange(3, 6))


def run_examples(name: str, check: Callable[[Hostile], Optional[str]], allowed: Sequence[Type[BaseException]],
                 examples: int = EXAMPLES) -> None:
    """Run ``check`` on ``examples`` seeded examples; fail on any exception not of ``allowed`` types
    (or on a problem ``check`` returns), naming the seed and index that replay it."""
    failures: List[str] = []
    for index in range(examples):
        rng = random.Random(f"{SEED}:{name}:{index}")
        try:
            problem = check(Hostile(rng))
        except tuple(allowed):
            continue
        except BaseException as exc:  # the point of the test: anything else escapes the connector's errors
            if isinstance(exc, KeyboardInterrupt):
                raise
            failures.append(f"example {index} (KAFKA_GROUP_FUZZ_SEED={SEED}): {type(exc).__name__}: "
                            f"{str(exc)[:300]}")
            continue
        if problem:
            failures.append(f"example {index} (KAFKA_GROUP_FUZZ_SEED={SEED}): {problem[:300]}")
    if failures:
        kinds = sorted({f.split(": ", 2)[1] for f in failures if f.split(": ", 2)[1].isidentifier()})
        raise AssertionError(f"{name}: {len(failures)} of {examples} examples escaped the connector's errors "
                             f"({', '.join(kinds)}):\n" + "\n".join(failures[:8]))
