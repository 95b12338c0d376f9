${header}
"""Reads the case inputs from stdin, calls candidate.${function} once per case and prints one
record per case. The expected outputs never come here: the host compares the records.

stdin:  <count>, then per case ${width} numbers (the two inputs' fields in order)
stdout: "R <index> <kind>" per case, or "E <index>" when the candidate raised; then
        "END <count>".
"""

import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import candidate


def record(index, result):
    return " ".join(["R", str(index), candidate.Kind(result.kind).value])


def candidate_traceback():
    """The exception being handled, with the candidate's frames only: this file's are not the
    agent's code, and only mislead it."""
    kind, error, tb = sys.exc_info()
    here = os.path.abspath(__file__)
    frames = [frame for frame in traceback.extract_tb(tb) if os.path.abspath(frame.filename) != here]
    return "".join(["Traceback (most recent call last):\n", *traceback.format_list(frames),
                    *traceback.format_exception_only(kind, error)])


def main():
    tokens = sys.stdin.read().split()
    count = int(tokens[0])
    pos = 1
    reported = False
    for index in range(count):
        v = [float(token) for token in tokens[pos:pos + ${width}]]
        pos += ${width}
        try:
            arg0 = ${arg0}
            arg1 = ${arg1}
            line = record(index, candidate.${function}(arg0, arg1))
        except Exception:
            if not reported:
                print(f"case {index}:", candidate_traceback(), file=sys.stderr)
            reported = True
            line = f"E {index}"
        sys.stdout.write(line + "\n")
    sys.stdout.write(f"END {count}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
