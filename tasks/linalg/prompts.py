"""Question wording and the answer-format instruction every prompt ends with.

Prompts are plain printable ASCII (the env's text spaces allow nothing else), and each one ends by
saying exactly what the ``ANSWER:`` line must hold, so a format failure is the model's, not ours.
"""

from __future__ import annotations

from .problem import AnswerKind

QUESTIONS: dict[str, str] = {
    "determinant": "Compute the determinant of the {n}x{n} matrix\n\n{A}",
    "rank": "What is the rank of the {m}x{n} matrix\n\n{A}",
    "trace": "Find the trace of the {n}x{n} matrix\n\n{A}",
    "transpose": "Write out the transpose of the {m}x{n} matrix\n\n{A}",
    "dot_product": "Compute the dot product of the vectors\n\n{u}\n{v}",
    "matvec": "Compute the matrix-vector product A x, where\n\n{A}\n\n{x}",
    "matmul": "Compute the matrix product A B, where\n\n{A}\n\n{B}",
    "inverse": "Find the inverse of the invertible {n}x{n} matrix\n\n{A}",
    "solve_system": "Solve A x = b for the vector x, where\n\n{A}\n\n{b}\n\nThe system has exactly one solution.",
    "eigenvalue": (
        "Find all eigenvalues of the {n}x{n} matrix\n\n{A}\n\nEvery eigenvalue of this matrix is an integer."
    ),
    "eigenvector": (
        "The {n}x{n} matrix\n\n{A}\n\nhas the eigenvalue {eigenvalue}, with multiplicity one. "
        "Find an eigenvector of A for the eigenvalue {eigenvalue}."
    ),
    "norm_squared": "Compute the squared Euclidean norm (the sum of the squared entries) of\n\n{v}",
    "is_symmetric": "Is the {n}x{n} matrix\n\n{A}\n\nsymmetric, that is, equal to its own transpose?",
}

_VALUE_FORMS: dict[AnswerKind, str] = {
    "scalar": "a single exact number: an integer, or a fraction such as -7/3",
    "vector": "the vector as a bracketed list, such as [1, -2/3, 4]",
    "matrix": "the matrix as a bracketed list of rows, such as [[1, 2], [3, 4]]",
    "boolean": "true or false",
    "eigenvalues": (
        "all eigenvalues as a bracketed list in any order, each repeated as often as its "
        "algebraic multiplicity, such as [2, 2, -1]"
    ),
    "direction": (
        "one eigenvector as a bracketed list, such as [1, -2, 3]; "
        "any nonzero multiple of a correct eigenvector is accepted"
    ),
}


def format_instruction(kind: AnswerKind, rel_tol: float) -> str:
    """The closing paragraph: where the answer goes, in what form, and how exact it must be."""
    exactness = (
        "Values must be exact."
        if rel_tol == 0
        else f"Exact fractions are preferred; decimals within a relative error of {rel_tol:g} are accepted."
    )
    return (
        "Reason as you like, then end your response with a final line of the form\n"
        "ANSWER: <value>\n"
        f"where <value> is {_VALUE_FORMS[kind]}. {exactness}"
    )


def build_prompt(topic: str, kind: AnswerKind, rel_tol: float, **parts: object) -> str:
    return QUESTIONS[topic].format(**parts) + "\n\n" + format_instruction(kind, rel_tol)
