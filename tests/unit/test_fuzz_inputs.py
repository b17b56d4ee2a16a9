"""Fuzzing the option parser and the offset documents: each input works or fails with the connector's own error."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest

from kafka_group.config.option_catalog import OPTION_SPELLING
from kafka_group.config.options import parse_source_options
from kafka_group.errors import KafkaGroupError
from kafka_group.formats import read_offset_document
from kafka_group.offsets import parse_assign, parse_starting_offsets

KEYS = list(OPTION_SPELLING.values()) + [
    "kafka.bootstrap.servers", "kafka.group.id", "kafka.group.instance.id", "kafka.enable.auto.commit",
    "kafka.sasl.password", "kafka.isolation.level", "startingOffsetsByTimestamp", "bogus", "KAFKA.GROUP.ID",
]
WORDS = ["", " ", "0", "-1", "1", "10", "true", "false", "earliest", "latest", "orders", "a,b", ".*", "(",
         "127.0.0.1:9092", "30 minutes", "2h", "m:f", "x:1", "fair", "\u00e9\u00e8", "null", "{}", "[]"]


def random_json(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(8 if depth < 3 else 5)
    if choice == 0:
        return rng.randint(-5, 1 << 40)
    if choice == 1:
        return rng.choice(WORDS)
    if choice == 2:
        return None
    if choice == 3:
        return rng.random()
    if choice == 4:
        return rng.choice([True, False, -2, -1])
    if choice == 5:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["orders", "0", "1", "-1", "@group", "x", "01", " 2"]): random_json(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def random_text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return json.dumps(random_json(rng))
    if rng.random() < 0.5:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(20)))
    return rng.choice(WORDS)


@pytest.mark.parametrize("seed", range(300))
def test_random_option_maps(seed: int) -> None:
    rng = random.Random(seed)
    options = {rng.choice(KEYS): random_text(rng) if rng.random() < 0.3 else rng.choice(WORDS)
               for _ in range(rng.randrange(1, 8))}
    if rng.random() < 0.7:
        options["kafka.bootstrap.servers"] = "127.0.0.1:9092"
    try:
        parse_source_options(options)
    except KafkaGroupError:
        pass


@pytest.mark.parametrize("seed", range(300))
def test_random_offset_documents(seed: int) -> None:
    rng = random.Random(seed)
    doc = random_json(rng)
    for parse in (lambda: read_offset_document(doc), lambda: parse_starting_offsets(json.dumps(doc)),
                  lambda: parse_assign(json.dumps(doc)), lambda: parse_starting_offsets(random_text(rng)),
                  lambda: parse_assign(random_text(rng))):
        try:
            parse()
        except KafkaGroupError:
            pass
