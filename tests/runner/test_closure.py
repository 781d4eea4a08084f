"""function_globals: the notebook globals a function needs, read from byte code."""

from __future__ import annotations

import textwrap

from taskcell.runner.closure import function_globals, is_notebook_defined


# -- function_globals ----------------------------------------------------------------------------
def notebook(source: str) -> dict:
    """A namespace filled the way a notebook fills it, but without ``__name__ == '__main__'``."""
    namespace: dict = {}
    exec(textwrap.dedent(source), namespace)
    return namespace


def test_function_globals_direct_reads_only() -> None:
    ns = notebook(
        """
        import math
        scale = 2
        shape = "unrelated"
        unused = 3
        def f(x):
            return math.sqrt(x.shape[0]) * scale + len(x)
        """
    )
    assert function_globals(ns["f"], ns) == {"math", "scale"}


def test_function_globals_transitive_and_recursive() -> None:
    ns = notebook(
        """
        offset = 1
        depth = 10
        def helper(n):
            return n + offset
        def walk(n):
            return helper(n) if n > depth else walk(n + 1)
        """
    )
    assert function_globals(ns["walk"], ns) == {"helper", "offset", "depth", "walk"}


def test_function_globals_mutual_recursion_terminates() -> None:
    ns = notebook(
        """
        def even(n):
            return n == 0 or odd(n - 1)
        def odd(n):
            return n != 0 and even(n - 1)
        """
    )
    assert function_globals(ns["even"], ns) == {"even", "odd"}


def test_function_globals_classes_nested_code_and_globals_decl() -> None:
    ns = notebook(
        """
        rate = 0.5
        base_size = 4
        counter = 0
        class Base:
            @property
            def size(self):
                return base_size
        class Model(Base):
            @staticmethod
            def make():
                return Model()
            def fit(self, xs):
                return [x * rate for x in xs]
        def train(xs):
            global counter
            counter += 1
            return Model.make().fit(xs)
        """
    )
    assert function_globals(ns["train"], ns) == {"counter", "Model", "rate", "base_size"}


def test_function_globals_follows_decorated_and_closures() -> None:
    ns = notebook(
        """
        import functools
        limit = 5
        factor = 3
        def logged(func):
            @functools.wraps(func)
            def wrapper(*args):
                return func(*args)
            return wrapper
        @logged
        def capped(x):
            return min(x, limit)
        @functools.lru_cache
        def tripled(x):
            return x * factor
        def run(x):
            return capped(x) + tripled(x)
        """
    )
    assert function_globals(ns["run"], ns) == {"capped", "tripled", "limit", "factor"}


def test_function_globals_does_not_follow_library_functions() -> None:
    ns = notebook(
        """
        from textwrap import dedent
        _whitespace_only_re = "a global textwrap.dedent reads in its own module"
        def f(s):
            return dedent(s)
        """
    )
    assert function_globals(ns["f"], ns) == {"dedent"}


def test_a_class_whose_getattr_answers_everything_is_looked_at_without_asking_it():
    """``__wrapped__`` and ``__globals__`` are read where Python keeps them: a dict subclass
    whose ``__getattr__`` raises KeyError, as a value or a library class's attribute."""

    class Loose(dict):
        def __getattr__(self, name):
            return self[name]

    class Library:
        defaults = Loose(a=1)

    Library.__module__ = "somelibrary"
    namespace = {"__name__": "__main__"}
    assert not is_notebook_defined(Loose(a=1), namespace)
    assert not is_notebook_defined(Library, namespace)
