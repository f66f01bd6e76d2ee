"""The README and the pages of docs/ say what really happens: their Python
examples run as doctests, their links resolve inside the repository (no
pointers to files that are not shipped), the README's Go example is a Go
Example test, and its test command is the one CI runs."""

from __future__ import annotations

import doctest
import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README] + DOCS
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def _blocks(page: pathlib.Path, lang: str) -> list[tuple[int, str]]:
    """(line number, text) of each fenced block of the language in the page."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(2)) for m in FENCE.finditer(text) if m.group(1) == lang]


# Optional frameworks: a block that imports one runs only where it is installed.
OPTIONAL = ("torch", "jax")


def _missing_framework(block: str) -> bool:
    names = re.findall(r"^>>> (?:import|from) ([\w.]+)", block, re.M)
    used = {n.split(".")[1] if n.startswith("pylucid.") else n.split(".")[0] for n in names} & set(OPTIONAL)
    return any(importlib.util.find_spec(name) is None for name in used)


def test_the_documentation_pages_exist() -> None:
    names = {p.name for p in DOCS}
    assert {"index.md", "semantics.md", "dtypes.md", "errors.md", "autograd.md", "interop.md",
            "install.md"} <= names, names


# A block that imports a framework (or pylucid's bridge to it) runs where
# the framework is installed and is skipped elsewhere (CI installs them).
FRAMEWORK_IMPORT = re.compile(r"^>>> (?:import|from) (?:pylucid\.)?(jax|torch|dask)\b", re.M)


def _missing_frameworks(block: str) -> set[str]:
    return {name for name in FRAMEWORK_IMPORT.findall(block) if importlib.util.find_spec(name) is None}


def test_framework_blocks_are_recognised() -> None:
    assert FRAMEWORK_IMPORT.findall(">>> import jax, jax.numpy as jnp\n>>> import pylucid.jax as pj\n") == [
        "jax", "jax"]
    assert FRAMEWORK_IMPORT.findall(">>> from torch import nn\n>>> import numpy\n") == ["torch"]
    assert _missing_frameworks(">>> import numpy as np\n") == set()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run_and_print_what_they_show(page: pathlib.Path) -> None:
    # Every ```python block is a doctest (>>> lines with their real output);
    # the blocks of one page share their names, as in one session.
    blocks = [(line, b) for line, b in _blocks(page, "python") if not _missing_frameworks(b)]
    globs: dict[str, object] = {"__name__": "__readme__"}
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    attempted = 0
    for line, block in blocks:
        assert block.lstrip().startswith(">>> "), "%s:%d: a python block that is not a doctest" % (page.name, line)
        if _missing_framework(block):
            continue  # a framework's block runs where the framework is installed (CI installs them)
        test = parser.get_doctest(block, globs, "%s:%d" % (page.name, line), str(page), line - 1)
        result = runner.run(test, clear_globs=False)
        globs = test.globs  # DocTest works on a copy: the next block continues from this one
        attempted += result.attempted
    assert runner.failures == 0, "%d of %d examples of %s print something else (see the output above)" % (
        runner.failures, attempted, page.name)
    if page in (README, ROOT / "docs" / "interop.md", ROOT / "docs" / "autograd.md"):
        assert attempted >= 5, attempted


def test_readme_examples_show_real_output() -> None:
    # The outputs the README once showed in comments, which were not the real
    # ones, are now doctest outputs.
    text = README.read_text()
    assert "amp_policy=<AmpPolicy.PROMOTE: 'Promote'>" in text
    assert "amp_policy=PROMOTE" not in text
    assert "array([1., 0., 1.], dtype=float32)" in text


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES + [ROOT / "setup.py", ROOT / "pyproject.toml"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_inside_the_repository(page: pathlib.Path) -> None:
    text = page.read_text()
    assert "../shared" not in text and "SPEC.md" not in text and "DESIGN.md" not in text
    assert "SPEC §" not in text and "SPEC\u00a0§" not in text
    for target in LINK.findall(text):
        if re.match(r"https?://", target):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert ROOT in path.parents and path.exists(), (page.name, target)


def test_readme_links_the_documentation() -> None:
    links = set(LINK.findall(README.read_text()))
    for page in DOCS:
        assert "docs/" + page.name in links, page.name


def test_readme_test_command_is_the_one_ci_runs() -> None:
    (command,) = [b.strip() for _, b in _blocks(README, "sh") if "pytest" in b]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci, command  # a line of its own, verbatim
    (main_job,) = [b.strip() for _, b in _blocks(README, "sh") if "fit_piecewise" in b]
    assert any(main_job in line for line in ci), main_job  # CI runs the main job from the sdist


def test_readme_go_example_is_a_go_example_test() -> None:
    # The Go block is the body of tests_go's Example_readme, whose `// Output:`
    # go test checks.
    (go,) = [b for _, b in _blocks(README, "go")]
    source = (ROOT / "tests_go" / "readme_example_test.go").read_text()
    # The block opens with its imports, the example file's own.
    imports = re.match(r"\s*import \((.*?)\n\)\n", go, re.S)
    assert imports, "the README's Go example shows its imports"
    file_imports = re.search(r"^import \((.*?)\n\)", source, re.S | re.M)
    assert file_imports and imports.group(1).split() == file_imports.group(1).split()
    go = go[imports.end():]
    m = re.search(r"^func Example_readme\(\) \{\n(.*?)^\}", source, re.S | re.M)
    assert m, "tests_go/readme_example_test.go has no Example_readme"
    body = [line.strip() for line in m.group(1).splitlines()]
    lines = [line.strip() for line in go.strip().splitlines()]
    code = [re.sub(r"\s*// .*$", "", line) for line in lines]
    body_code = [re.sub(r"\s*// .*$", "", line) for line in body]
    assert [line for line in body_code if line in code] == code, (code, body)
    printed = re.search(r"// (\[.*\])$", lines[-1])
    assert printed and ("// Output:" in m.group(1)) and ("// " + printed.group(1)) in body[body.index("// Output:"):]


SOURCE_SUFFIXES = {".py", ".go", ".c", ".h", ".md", ".toml", ".sh", ".in"}
OUTSIDE = ("../shared", "SPEC.md", "DESIGN.md", "SPEC §", "SPEC\u00a0§", "DESIGN rule")


def test_no_source_file_cites_documents_outside_the_repository() -> None:
    """Comments and docs cite docs/, which ships with the code; users never
    see the design notes the project was started from."""
    files = [p for p in ROOT.rglob("*") if p.is_file() and (p.suffix in SOURCE_SUFFIXES or p.parent.name == ".ci")
             and not any(part in ("build", "_native", ".git", "node_modules") or part.endswith(".egg-info")
                         for part in p.relative_to(ROOT).parts)
             and p != pathlib.Path(__file__).resolve()]
    assert len(files) > 100  # the walk found the tree
    offenders = ["%s: %s" % (p.relative_to(ROOT), word) for p in files for word in OUTSIDE
                 if word in p.read_text(errors="replace")]
    assert not offenders, offenders


def test_readme_first_screen_is_what_it_is_the_two_commands_and_an_example() -> None:
    lines = README.read_text().splitlines()
    screen = "\n".join(lines[:60])
    assert "fit_piecewise.py" in screen and "python3 -m pytest -q tests_py" in screen
    assert ">>> y = ops.minimum(a, b)" in screen  # the short example starts on it
    # the benchmark story lives in docs/performance.md, the README links it
    text = README.read_text()
    assert "| case | pylucid | NumPy |" not in text and "(docs/performance.md)" in text
    assert "| case | pylucid | NumPy |" in (ROOT / "docs" / "performance.md").read_text()
