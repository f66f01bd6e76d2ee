"""Every install instruction works as written (docs/install.md, "The name to
install"): the index's `pylucid` is an unrelated project, so a `pip install`
in the README, docs/, the examples or a message of the package names a path
(a checkout, `.`, with or without extras) or a wheel file, never a bare
index name; and the distribution is named pylucid-tensors."""

import pathlib
import re
import shlex
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (the floor)
    tomllib = None

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*.py")),
           *sorted((ROOT / "python" / "pylucid").glob("*.py"))]
# `pip install` and what follows it, up to the end of a code span or line
_COMMAND = re.compile(r"pip3? install ([^`\n]*)")


def _targets(args: str):
    """The requirement arguments of a pip install command line (options and
    their values dropped; the line ends at a shell operator)."""
    args = args.replace('\\"', '"')  # a command quoted inside a Python string: \" is "
    words = shlex.split(args.split("&&")[0].split(";")[0].split(")")[0])
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w in ("-r", "-c", "-e", "--target", "--prefix", "-t"):
            skip = w != "-e"  # -e takes a path: keep it as a target
        elif not w.startswith("-"):
            out.append(w)
    return out


def _is_path_or_wheel(target: str) -> bool:
    base = target.split("[")[0]
    return base.startswith((".", "/", "~", "$")) or base.endswith(".whl") or "/" in base


def test_every_pip_install_names_a_path_or_a_wheel():
    seen = 0
    bad = []
    for path in SOURCES:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in _COMMAND.finditer(line):
                targets = _targets(m.group(1))
                seen += 1
                for t in targets:
                    if not _is_path_or_wheel(t):
                        bad.append("%s:%d: %s" % (path.relative_to(ROOT), lineno, line.strip()))
    assert seen >= 8, seen  # the README's commands, docs/install.md's lines, ...
    assert not bad, "install by a bare index name:\n" + "\n".join(bad)


def test_the_checker_refuses_bare_names():
    # the rule itself, on the lines the README once printed
    assert _targets('"pylucid[torch]"') == ["pylucid[torch]"] and not _is_path_or_wheel("pylucid[torch]")
    assert not _is_path_or_wheel("ml_dtypes")
    assert _is_path_or_wheel(".[torch]") and _is_path_or_wheel(".")
    assert _is_path_or_wheel("./dist/pylucid_tensors-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl[torch]")
    assert _targets('-q ".[test]" && go vet ./...') == [".[test]"]
    assert _targets('install \\".[torch]\\" from a checkout') == ["install", ".[torch]", "from", "a", "checkout"]


def test_the_distribution_is_named_pylucid_tensors():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if tomllib is not None:
        assert tomllib.loads(text)["project"]["name"] == "pylucid-tensors"
    else:
        assert re.search(r'^name = "pylucid-tensors"', text, re.M)
    assert "pylucid-tensors" in (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
