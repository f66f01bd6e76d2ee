"""Writes the public ops' types into python/pylucid/ops.py from the op
records: one line per op and alias, ``name: _<Form>Op``, between the
BEGIN/END markers of its type-checking block. The records (core/ops) stay
the one place an op is declared; tests_py checks the block is current.

    python3 tools/gen_op_types.py          # rewrite the block
    python3 tools/gen_op_types.py --check  # exit 1 if it is stale
"""

import pathlib
import sys

OPS = pathlib.Path(__file__).resolve().parent.parent / "python" / "pylucid" / "ops.py"
BEGIN = "    # BEGIN the ops' types"
END = "    # END the ops' types"


def block() -> str:
    from pylucid import _lib

    lines = []
    for s in _lib.schema_table():
        if s["signature"]:
            for name in [s["name"]] + list(s["aliases"]):
                lines.append("    %s: _%sOp\n" % (name, s["signature"].capitalize()))
    return "".join(sorted(lines))


def rewrite(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    first, rest = rest.split("\n", 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + first + "\n" + block() + END + tail


def main() -> int:
    text = OPS.read_text()
    new = rewrite(text)
    if "--check" in sys.argv[1:]:
        if new != text:
            print("%s: the ops' types are stale; run python3 tools/gen_op_types.py" % OPS, file=sys.stderr)
            return 1
        return 0
    OPS.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
