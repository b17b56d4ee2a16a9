"""CONTRIBUTING.md's folder table is the tree's: every package folder with its ``__init__`` docstring's role,
every top-level folder described (``tests/layout_doc.py`` generates the table)."""

from __future__ import annotations

import pathlib

import pytest

from tests.layout_doc import (
    BEGIN,
    COMMAND,
    END,
    PAGE,
    ROOT,
    TOP_LEVEL,
    UNDESCRIBED,
    main,
    render_page,
    role,
    rows,
    top_level_folders,
)


def test_contributing_holds_the_table_the_tree_gives() -> None:
    assert main(["--check", str(ROOT / PAGE)]) == 0, (
        f"{PAGE}'s folder table differs from the tree: run `{COMMAND} --write {PAGE}`")


def test_every_top_level_folder_is_described_and_every_description_has_its_folder() -> None:
    found = top_level_folders()
    undescribed = [folder for folder, what in rows() if what == UNDESCRIBED]
    assert undescribed == [], f"top-level folders without a description in tests/layout_doc.py: {undescribed}"
    assert sorted(set(TOP_LEVEL) - set(found)) == [], "tests/layout_doc.py describes folders that are gone"


def test_every_package_folder_has_a_row_with_its_docstrings_first_paragraph() -> None:
    table = dict(rows())
    for package in (ROOT / "connector" / "kafka_group", ROOT / "python" / "pyspark_kafka_group"):
        for init in package.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            assert table[f"{init.parent.relative_to(ROOT).as_posix()}/"] == role(init)
    assert table["python/pyspark_kafka_group/sink/"].startswith("Landing a `kafka-group` stream in Delta Lake")


def test_a_new_folder_and_a_new_package_show_up_and_ignored_folders_do_not(tmp_path: pathlib.Path) -> None:
    (tmp_path / ".gitignore").write_text("build/\n/site/\n*.egg-info/\n", encoding="utf-8")
    for name in ("build", "site", "x.egg-info", ".venv", "scratch", "tests"):
        (tmp_path / name).mkdir()
    package = tmp_path / "python" / "pyspark_kafka_group" / "routing"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text('"""The package."""\n', encoding="utf-8")
    (package / "__init__.py").write_text('"""Routing rows to many tables: the\nrules.\n\nMore."""\n',
                                         encoding="utf-8")
    assert top_level_folders(tmp_path) == ["python", "scratch", "tests"]
    assert rows(tmp_path) == [("python/", TOP_LEVEL["python"]), ("python/pyspark_kafka_group/", "The package."),
                              ("python/pyspark_kafka_group/routing/", "Routing rows to many tables: the rules."),
                              ("scratch/", UNDESCRIBED), ("tests/", TOP_LEVEL["tests"])]


def test_the_table_replaces_only_what_stands_between_the_markers() -> None:
    page = f"# Title\n\nbefore\n\n{BEGIN}\nold table\n{END}\n\nafter\n"
    rendered = render_page(page)
    assert rendered.startswith(f"# Title\n\nbefore\n\n{BEGIN}\n| folder | what |\n")
    assert rendered.endswith(f"|\n{END}\n\nafter\n") and "old table" not in rendered
    assert render_page(rendered) == rendered
    with pytest.raises(ValueError, match="no folder table markers"):
        render_page("# Title\n")
