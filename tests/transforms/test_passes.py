"""Source in, source out, for the front-end passes."""

import ast
import textwrap

from s2sad.transforms.front import desugar, normalize
from s2sad.transforms.astutil import Namer
from s2sad.transforms.front.parse import Env, ParsedFunction, SourceInfo


def _parsed(src: str) -> ParsedFunction:
    node = ast.parse(textwrap.dedent(src)).body[0]
    return ParsedFunction(
        node,
        SourceInfo("<test>", node.name, "test"),
        Env(extra={"np": __import__("numpy")}),
    )


def _namer(p):
    import builtins

    return Namer(
        {n.id for n in ast.walk(p.node) if isinstance(n, ast.Name)} | set(dir(builtins))
    )


def run_desugar(src: str) -> str:
    p = _parsed(src)
    return ast.unparse(desugar.run(p.node, _namer(p)))


def run_normalize(src: str) -> str:
    p = _parsed(src)
    namer = _namer(p)
    desugar.run(p.node, namer)
    node, _ = normalize.run(p, namer)
    return ast.unparse(node)


def expect(got: str, want: str) -> None:
    assert got.strip() == textwrap.dedent(want).strip(), got


def test_desugar_early_return_in_loop():
    expect(
        run_desugar("""
        def f(x):
            for i in range(5):
                if x > 10:
                    return x
                x = x * 2
            return x
    """),
        """
        def f(x):
            result = None
            returned = False
            for i in range(5):
                if x > 10:
                    result = x
                    returned = True
                if not returned:
                    x = x * 2
                if returned:
                    break
            if not returned:
                result = x
            return result
    """,
    )


def test_desugar_break_and_continue_flags():
    expect(
        run_desugar("""
        def f(x):
            while x < 10:
                if x == 3:
                    continue
                if x == 5:
                    break
                x = x + 1
            return x
    """),
        """
        def f(x):
            stop = False
            while x < 10:
                skip = False
                if x == 3:
                    skip = True
                if not skip:
                    if x == 5:
                        stop = True
                    if not stop:
                        x = x + 1
                if stop:
                    break
            return x
    """,
    )


def test_desugar_leaves_a_single_final_return_alone():
    expect(
        run_desugar("""
        def f(x):
            y = x * 2
            return y
    """),
        """
        def f(x):
            y = x * 2
            return y
    """,
    )


def test_normalize_flattens_and_renames():
    expect(
        run_normalize("""
        def f(x, W):
            h = np.tanh(W @ x + 1.0)
            h = h * 2
            return np.sum(h)
    """),
        """
        def f(x, W):
            matmul = W @ x
            add = matmul + 1.0
            h = np.tanh(add)
            h_1 = h * 2
            out = np.sum(h_1)
            return out
    """,
    )


def test_normalize_loop_over_rows_and_augassign():
    expect(
        run_normalize("""
        def f(X):
            s = 0.0
            for row in X:
                s += row
            return s
    """),
        """
        def f(X):
            s = 0.0
            len_1 = len(X)
            r = range(len_1)
            for i in r:
                row = X[i]
                add = s + row
                s = add
            return s
    """,
    )


def test_normalize_ternary_becomes_branch():
    expect(
        run_normalize("""
        def f(x):
            y = x * 2 if x > 0 else -x
            return y
    """),
        """
        def f(x):
            cond = x > 0
            if cond:
                y = x * 2
            else:
                y = -x
            return y
    """,
    )


def test_comment_markers_become_comments_even_where_they_open_a_body():
    from s2sad.transforms.comments import restore

    text = 'def f():\n    """S2SAD_COMMENT_0"""\n    x = 1\n    \'S2SAD_COMMENT_1\''
    assert restore(text, ["grad of: a", "grad of: b"]) == (
        "def f():\n    # grad of: a\n    x = 1\n    # grad of: b"
    )
