"""What a team installing the plugin gets (SPEC §21): license, metadata, names, no local paths.

The wheel carries the license and full metadata under the distribution's own name, every install
command names that distribution, and no development machine's path is printed anywhere a user
reads.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = "pytest-agent-evalset"
# Text a user reads: the package's messages, the examples, the docs, the README, the benchmarks'
# results.
USER_TEXT = ("pytest_agent_eval", "examples", "docs", "benchmarks", "README.md", "CHANGELOG.md")


def _user_files() -> list[Path]:
    found = []
    for name in USER_TEXT:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        found += [
            p
            for p in files
            if p.suffix in {".py", ".md", ".yaml", ".yml", ".json", ".toml"}
            and "_build" not in p.parts
        ]
    return found


def test_every_install_command_names_the_distribution() -> None:
    """PyPI's `pytest-agent-eval` is another project: `pip install 'pytest-agent-evalset[x]'`."""
    wrong = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _user_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"pip install[^\n]*\bpytest-agent-eval(?!set)\b", line)
    ]
    assert wrong == []


def test_no_development_machine_path_is_printed() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in [*_user_files(), ROOT / "benchmarks" / "RESULTS.md"]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"(?<![\w.])/(work|root|home)/\w", line) and path.suffix == ".md"
    ]
    assert wrong == []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_carries_the_license_and_metadata_under_the_new_name(
    wheel: zipfile.ZipFile,
) -> None:
    assert Path(wheel.filename or "").name.startswith("pytest_agent_evalset-")
    names = wheel.namelist()
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    info = Parser().parsestr(wheel.read(metadata).decode())
    assert info["Name"] == NAME
    assert info["License-Expression"] == "MIT"
    assert info.get_all("License-File") == ["LICENSE"]
    license_text = wheel.read(metadata.replace("METADATA", "licenses/LICENSE")).decode()
    assert (
        license_text.startswith("MIT License")
        and "the pytest-agent-evalset authors" in license_text
    )
    assert info["Author"] == "the pytest-agent-evalset authors"
    classifiers = info.get_all("Classifier")
    assert "Topic :: Software Development :: Testing" in classifiers
    assert "Framework :: Pytest" in classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert {f"Programming Language :: Python :: 3.{m}" for m in (10, 11, 12, 13)} <= set(
        classifiers
    )
    urls = dict(u.split(", ", 1) for u in info.get_all("Project-URL"))
    assert {"Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    # the import package and the pytest plugin keep their names
    assert "pytest_agent_eval/plugin/__init__.py" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "agent_eval = pytest_agent_eval.plugin" in wheel.read(entry_points).decode()


def test_the_changelog_names_this_version() -> None:
    """The version is written once, in ``pytest_agent_eval/version.py``; the changelog has it.

    pyproject reads the version from there, and the changelog has its section.
    """
    assert 'dynamic = ["version"]' in (ROOT / "pyproject.toml").read_text()
    version = re.search(
        r'^__version__ = "(.+)"', (ROOT / "pytest_agent_eval" / "version.py").read_text(), re.M
    )
    assert version is not None
    assert f"## {version.group(1)}" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
